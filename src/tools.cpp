// CLI11 wiring of `trace stats`, `trace import`, `compare` and `plot`
// (tools.hpp); main.cpp calls add_tool_commands once.
#include <CLI/CLI.hpp>

#include <memory>

#include "commands.hpp"
#include "tools.hpp"

namespace moekit {

std::vector<ToolCommand> add_tool_commands(CLI::App& app) {
  std::vector<ToolCommand> cmds;
  auto* trace = app.add_subcommand("trace", "router traces: statistics, and import of engines' routing dumps");
  trace->require_subcommand(1);
  const std::string plain = "Exit codes: 0 ok, 2 bad usage or bad input (one stderr line naming the file).";
  trace->footer(plain);

  struct Stats {
    std::string file, format = "text";
    std::int64_t num_experts = 0;
    int top = 10;
  };
  auto st = std::make_shared<Stats>();
  auto* stats = trace->add_subcommand("stats", "per-expert load of a topk_ids .npy (int32/int64 [tokens, topk]): "
                                               "counts, max/mean, hottest experts, invalid ids");
  stats->add_option("file", st->file, "topk_ids .npy")->required();
  stats->add_option("--num-experts,-E", st->num_experts, "number of experts E (ids outside [0, E) are invalid)")
      ->required();
  stats->add_option("--top", st->top, "how many hottest experts to list")->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  stats->add_option("--format", st->format, "text or json")->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  stats->footer(plain);
  cmds.push_back({stats, [st] { return tools::run_trace_stats(st->file, st->num_experts, st->format, st->top); }});

  auto im = std::make_shared<tools::ImportOptions>();
  auto fields = std::make_shared<std::string>("prompt_routed_experts,routed_experts");
  auto* imp = trace->add_subcommand(
      "import", "convert engines' routing dumps to topk_ids .npy files, one per layer: OUTDIR/layer<L>.npy, "
                "int32 [tokens, topk] (docs/trace.md)");
  imp->add_option("format", im->format,
                  "json: [token][layer][topk] nested lists per request (vLLM, SGLang routed experts); "
                  "jsonl: one record per line with a layer and an expert list; csv: a layer column and a "
                  "bracketed expert list column")
      ->required()
      ->check(CLI::IsMember({"json", "jsonl", "csv"}));
  imp->add_option("inputs", im->inputs, "dump files, read in order (their tokens are concatenated)")->required();
  imp->add_option("-o,--out", im->out, "output folder (created; its layer files are written as one set)")
      ->required();
  imp->add_option("--num-experts,-E", im->num_experts, "check every id is in [0, E)");
  imp->add_option("--field", *fields,
                  "json: the object fields holding routed experts, comma separated, taken in this order")
      ->capture_default_str();
  imp->add_option("--layers", im->layers, "json: layers of base64 int32 dumps (SGLang's routed_experts)");
  imp->add_option("--topk", im->topk, "json: topk of base64 int32 dumps");
  imp->add_option("--layer-field", im->layer_field, "jsonl, csv: the layer field")->capture_default_str();
  imp->add_option("--experts-field", im->experts_field, "jsonl, csv: the expert list field")->capture_default_str();
  imp->footer("Formats, and where vLLM and SGLang return routed experts: docs/trace.md. " + plain);
  cmds.push_back({imp, [im, fields] {
                    im->fields.clear();
                    std::size_t start = 0;
                    while (start <= fields->size()) {
                      const std::size_t comma = std::min(fields->find(',', start), fields->size());
                      if (comma > start) im->fields.push_back(fields->substr(start, comma - start));
                      start = comma + 1;
                    }
                    return tools::run_trace_import(*im);
                  }});

  struct Cmp {
    std::string base, next, format = "text";
    double threshold = 0.05;
    std::vector<std::string> columns;
  };
  auto cp = std::make_shared<Cmp>();
  auto* cmp = app.add_subcommand("compare",
                                 "compare two JSON-lines result files (--results, bench/results): old, new, ratio "
                                 "and a verdict per cell; exit 1 when a cell regressed");
  cmp->add_option("base", cp->base, "baseline results (.jsonl)")->required();
  cmp->add_option("new", cp->next, "new results (.jsonl)")->required();
  cmp->add_option("--threshold", cp->threshold,
                  "relative slowdown that counts, when it is also outside both runs' min..max spread")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmp->add_option("--format", cp->format, "text or json")->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmp->add_option("--columns", cp->columns,
                  "text: the parameters shown as columns, comma separated, or all (default: those that differ "
                  "between cells; the ones every cell shares are listed once above the table)")
      ->delimiter(',');
  cmp->footer("Exit codes: 0 no cell regressed, 1 a cell regressed, 2 bad usage or a bad file (FILE:LINE). "
              "docs/regression.md");
  cmds.push_back(
      {cmp, [cp] { return tools::run_compare(cp->base, cp->next, cp->threshold, cp->format, cp->columns); }});

  struct Plot {
    std::vector<std::string> files;
    std::string out;
    tools::PlotOptions o;
  };
  auto pl = std::make_shared<Plot>();
  auto* plot = app.add_subcommand("plot", "SVG chart of JSON-lines results: time or GB/s against tokens, log axes, "
                                          "one line per variant, one panel per group of the other parameters");
  plot->add_option("results", pl->files, "results files (.jsonl)")->required();
  plot->add_option("-o,--output", pl->out, "the .svg to write (atomically)")->required();
  plot->add_option("--metric", pl->o.metric, "time (median us per launch) or gbps")
      ->check(CLI::IsMember({"time", "gbps"}))
      ->capture_default_str();
  plot->add_option("--x", pl->o.x, "the parameter on the x axis (default: tokens, else numel, batch or bs)");
  plot->add_option("--title", pl->o.title, "chart title (default: made from the records)");
  plot->footer(plain + " docs/regression.md");
  cmds.push_back({plot, [pl] { return tools::run_plot(pl->files, pl->out, pl->o); }});
  return cmds;
}

}  // namespace moekit
