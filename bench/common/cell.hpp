// What every bench program's cells and main() do alike, around a family's own
// measuring: a variant that does not take the shape is "n/a"; a cell whose
// output differs from the CPU reference is "fail" (its timing kept); a CUDA
// error is "error"; each is written as one record (record.hpp). Uses only
// the Writer / Record API.
#pragma once

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "cuda_util.hpp"
#include "record.hpp"
#include "timing.hpp"

namespace moekit::bench {

// One cell, finished. `not_applicable`: the variant's reason, or nullptr (then
// `body` never runs). `body(rec)` launches once, checks the output, times
// (rec.m = measure(...)) and returns "" or the first difference from the
// reference; anything it throws is the cell's "error". A failed or erroneous
// cell is also said on stderr.
template <class Body>
Record run_cell(Record rec, const char* not_applicable, const Body& body) {
  if (not_applicable != nullptr) {
    rec.m.status = "n/a";
    rec.m.reason = not_applicable;
    return rec;
  }
  try {
    const std::string why = body(rec);
    if (rec.m.status == "ok" && !why.empty()) {
      rec.m.status = "fail";
      rec.m.reason = why;
    }
  } catch (const std::exception& e) {
    rec.m.status = "error";
    rec.m.reason = e.what();
  }
  if (rec.m.status == "error" || rec.m.status == "fail")
    std::fprintf(stderr, "%s, %s %s: %s %s\n", rec.table.c_str(), rec.variant.c_str(),
                 detail::object(rec.params).c_str(), rec.m.status.c_str(), rec.m.reason.c_str());
  return rec;
}

// run_cell, written as one record.
template <class Body>
void write_cell(Writer& out, Record rec, const char* not_applicable, const Body& body) {
  out.write(run_cell(std::move(rec), not_applicable, body));
}

// One launch of copy 0 on the process stream, waited for (before the check).
template <class Launch>
void launch_once(const Launch& launch) {
  launch(process_stream(), 0);
  cuda_check_last("launch");
  cuda_sync("kernel");
}

// main() of bench_<family>: `--json FILE` (else stdout), exit 3 without a
// CUDA device or on an error outside the cells, the device's copy bandwidth
// in every record; `cells(out)` writes the records.
inline int run_bench(int argc, char** argv, const std::string& family, const std::function<void(Writer&)>& cells) {
  const std::string name = "bench_" + family;
  try {
    const std::string json = take_json_arg(argc, argv);
    if (cuda_device_count() == 0) {
      std::fprintf(stderr, "%s: no CUDA device\n", name.c_str());
      return 3;
    }
    // The records' op is the CLI's command name: the folder's '_' is '-' there (moe_path: moe-path).
    std::string op = family;
    std::replace(op.begin(), op.end(), '_', '-');
    Writer out(name, op, json);
    out.set_copy_gbps(measured_copy_bandwidth_gbps());
    cells(out);
    std::fprintf(stderr, "%s: done\n", name.c_str());
    out.finish();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
    return 3;
  }
}

}  // namespace moekit::bench
