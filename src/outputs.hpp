// Writing .npy outputs safely: a run's output set is replaced as a whole or
// not at all, temp files never outlive the process (SIGINT/SIGTERM/SIGHUP
// included), and targets that are not plain writable files are refused.
// Errors throw InputError "PATH: problem" (exit 2). See docs/npy.md.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "npy.hpp"

namespace moekit::outputs {

struct File {
  std::string path;
  const npy::Array* array = nullptr;
  const std::string* bytes = nullptr;  // instead of an array: the file's whole contents (an SVG, ...)
};

// Checks every target first (an existing target must be a writable regular
// file), writes every array to a temp file beside its target, then renames
// them all; if a rename fails, the targets already replaced get their previous
// contents back (or are removed when they did not exist) and every temp file
// is removed.
void write_set(const std::vector<File>& files);

// `gen -o`: a set of one.
void write_file(const std::string& path, const npy::Array& a);
// A text file (`plot -o`), with the same guarantees.
void write_text_file(const std::string& path, const std::string& contents);

// `--out DIR`: creates DIR (and parents) if missing, writes DIR/NAME for each
// (NAME, array) as one set and returns the paths written, in order.
std::vector<std::string> write_folder(const std::string& dir,
                                      const std::vector<std::pair<std::string, const npy::Array*>>& files);

// Temp names are ".NAME.moekit-PID-N.tmp" beside NAME. If `file_name` is one
// for `target_name`, returns its PID, else -1. A run removes the temp files of
// its targets whose PID is no longer alive (left by a crash or SIGKILL).
long temp_owner(std::string_view file_name, std::string_view target_name);

// Test seams: the rename used to commit a set, and a callback run once all temp
// files of a set are written (before any rename). Production leaves them alone.
namespace testing {
extern int (*rename_fn)(const char* from, const char* to);
extern void (*after_temps_written)(const std::vector<std::string>& temps);
}  // namespace testing

}  // namespace moekit::outputs
