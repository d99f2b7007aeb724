// `moekit sass OP --variant V [--kernel NAME]`: the SASS of a variant's
// kernels, read by cuobjdump from this very binary's fatbin and filtered to the
// kernels the variant's registry entry names (kernel_resources.hpp).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "commands.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "kernel_resources.hpp"

namespace moekit {
namespace {

// `tool` found in a PATH directory, or "".
std::string on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  std::size_t i = 0;
  while (i <= dirs.size()) {
    std::size_t j = dirs.find(':', i);
    if (j == std::string::npos) j = dirs.size();
    const std::string dir = j > i ? dirs.substr(i, j - i) : std::string(".");
    const std::string full = dir + "/" + tool;
    if (access(full.c_str(), X_OK) == 0) return full;
    i = j + 1;
  }
  return "";
}

// This executable's path: /proc/self/exe, else argv[0].
std::string self_path(const char* argv0) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) return std::string(buf, static_cast<std::size_t>(n));
  return argv0 != nullptr ? argv0 : "";
}

// "Function : NAME" of a cuobjdump -sass line, or "".
std::string function_of(const std::string& line) {
  const std::size_t at = line.find("Function : ");
  if (at == std::string::npos) return "";
  std::string name = line.substr(at + 11);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return name;
}

}  // namespace

int run_sass(const std::string& op, const std::string& variant, const std::string& kernel, const char* argv0) {
  Family* f = find_family(op);
  if (f == nullptr) throw InputError(fmt::format("sass: unknown op '{}' (see `moekit variants`)", op));
  const std::string fop(f->command());
  if (!variant_spec(fop, variant))
    throw InputError(fmt::format("sass: unknown {} variant '{}' (see `moekit variants {}`)", fop, variant, fop));
  const KernelMatch m = variant_kernels(fop, variant);
  if (!m.error.empty()) throw InputError(fmt::format("sass: {} {}: kernels: {}", fop, variant, m.error));
  std::set<std::string, std::less<>> wanted;
  for (const KernelRecord* r : m.records) {
    const std::string shown = split_kernel_name(demangle(r->mangled)).short_name;
    if (kernel.empty() || shown.find(kernel) != std::string::npos || r->mangled.find(kernel) != std::string::npos)
      wanted.insert(std::string(r->mangled));
  }
  if (wanted.empty())
    throw InputError(fmt::format("sass: no kernel of {} {} matches '{}' (see `moekit variants {} --resources`)", fop,
                                 variant, kernel, fop));
  const std::string tool = on_path("cuobjdump");
  if (tool.empty())
    throw InputError("sass: cuobjdump not found on PATH (it comes with the CUDA toolkit: add its bin/ to PATH)");
  const std::string exe = self_path(argv0);

  int fds[2];
  if (pipe(fds) != 0) throw InputError(fmt::format("sass: pipe: {}", std::strerror(errno)));
  // The tool's own messages go to a file: its first line joins ours.
  FILE* errs = std::tmpfile();
  if (errs == nullptr) throw InputError(fmt::format("sass: tmpfile: {}", std::strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) throw InputError(fmt::format("sass: fork: {}", std::strerror(errno)));
  if (pid == 0) {
    dup2(fileno(errs), STDERR_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(tool.c_str(), "cuobjdump", "-sass", exe.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  // Blocks start at "Function : NAME" and end at the next one or at a line
  // that is neither code nor blank (a new cubin's header).
  std::string arch;
  bool printing = false;
  std::size_t printed = 0;
  char* line = nullptr;
  std::size_t cap = 0;
  while (getline(&line, &cap, in) > 0) {
    const std::string l(line);
    if (const std::size_t at = l.find("code for sm_"); at != std::string::npos) {
      arch = l.substr(at + 9);
      while (!arch.empty() && (arch.back() == '\n' || arch.back() == ' ')) arch.pop_back();
      printing = false;
      continue;
    }
    if (const std::string fn = function_of(l); !fn.empty()) {
      printing = wanted.count(fn) != 0;
      if (printing) {
        ++printed;
        fmt::print("\n// {} {}\n// {}\n", arch, demangle(fn), fn);
      }
      continue;
    }
    if (l.starts_with("Fatbin")) printing = false;
    if (printing) fmt::print("{}", l);
  }
  std::free(line);
  std::fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  std::string said;
  std::rewind(errs);
  for (int c = std::fgetc(errs); c != EOF && c != '\n'; c = std::fgetc(errs)) said += static_cast<char>(c);
  std::fclose(errs);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw InputError(fmt::format("sass: {} -sass {} failed (exit {}){}{}", tool, exe,
                                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, said.empty() ? "" : ": ", said));
  if (printed == 0)
    throw InputError(fmt::format("sass: cuobjdump printed no SASS for the {} kernel(s) of {} {}", wanted.size(), fop,
                                 variant));
  return kOk;
}

}  // namespace moekit
