// Small driver over src/npy for the NumPy interop and malformed-corpus tests.
//   npy_tool describe [--dtype NAME] FILE     prints "<dtype> <shape>", e.g. "float32 (2, 3)"
//   npy_tool copy [--dtype NAME] IN OUT       reads IN (any accepted form) and writes OUT
// Exit codes as in the CLI: 0 ok, 2 bad usage or bad input (one line on stderr).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "errors.hpp"
#include "npy.hpp"

namespace {

int usage(const char* why) {
  std::fprintf(stderr, "npy_tool: %s (usage: npy_tool describe|copy [--dtype NAME] FILE [OUT])\n", why);
  return moekit::kBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage("missing command");
  const std::string cmd = args[0];
  moekit::npy::ReadOptions opt;
  std::vector<std::string> files;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--dtype") {
      if (i + 1 >= args.size()) return usage("--dtype needs a value");
      opt.reinterpret = moekit::npy::parse_dtype(args[++i]);
      if (!opt.reinterpret) return usage("unknown dtype");
    } else {
      files.push_back(args[i]);
    }
  }
  try {
    if (cmd == "describe" && files.size() == 1) {
      const auto a = moekit::npy::read(files[0], opt);
      std::printf("%s %s\n", std::string(moekit::npy::dtype_name(a.dtype)).c_str(),
                  moekit::npy::format_shape(a.shape).c_str());
      return moekit::kOk;
    }
    if (cmd == "copy" && files.size() == 2) {
      moekit::npy::write(files[1], moekit::npy::read(files[0], opt));
      return moekit::kOk;
    }
    return usage("bad command or wrong number of files");
  } catch (const moekit::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return moekit::kBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "npy_tool: internal error: %s\n", e.what());
    return 70;
  }
}
