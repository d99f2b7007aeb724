// Output sets: validate every target, write temps, commit with renames (rolled
// back on failure), and unlink registered temps from a signal handler.
#include "outputs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "display.hpp"
#include "errors.hpp"

namespace moekit::outputs {

namespace testing {
int (*rename_fn)(const char*, const char*) = ::rename;
void (*after_temps_written)(const std::vector<std::string>&) = nullptr;
}  // namespace testing

namespace {

[[noreturn]] void fail(const std::string& path, std::string_view what) {
  throw InputError(fmt::format("{}: {}", display_path(path), what));
}

std::string errno_text(int e) { return std::strerror(e); }

// ---------------------------------------------------------------------------
// Temp-file registry read by the signal handler. Only fixed storage and
// lock-free atomics: the handler may run at any point of the main thread.
// ---------------------------------------------------------------------------
constexpr int kSlots = 64;
constexpr std::size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<int> g_used[kSlots];
static_assert(std::atomic<int>::is_always_lock_free);
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temps_and_die(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load() != 0) ::unlink(g_paths[i]);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);  // blocked while in the handler: delivered on return, with the default action
}

// Checked on every set (a few syscalls): a caller may have changed the
// dispositions since the last one.
void install_handlers() {
  struct sigaction sa {};
  sa.sa_handler = remove_temps_and_die;
  sigemptyset(&sa.sa_mask);
  for (int s : kCleanupSignals) sigaddset(&sa.sa_mask, s);
  for (int s : kCleanupSignals) {
    struct sigaction old {};
    // A signal the caller ignores (nohup, `&` in some shells) stays ignored.
    if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::sigaction(s, &sa, nullptr);
  }
  // Past RLIMIT_FSIZE, write() then fails with EFBIG and the temp is removed,
  // instead of SIGXFSZ killing the process with the temp left behind.
  struct sigaction old {};
  if (::sigaction(SIGXFSZ, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGXFSZ, SIG_IGN);
}

// A registered path: unlinked by the handler until released.
class Registered {
 public:
  explicit Registered(const std::string& target, const std::string& path) {
    if (path.size() >= kPathMax) fail(target, "cannot write: path too long");
    for (int i = 0; i < kSlots; ++i) {
      if (g_used[i].load() == 0) {
        std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
        g_used[i].store(1);
        slot_ = i;
        return;
      }
    }
    fail(target, "cannot write: too many files in one output set");
  }
  Registered(Registered&& o) noexcept : slot_(std::exchange(o.slot_, -1)) {}
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;
  Registered& operator=(Registered&&) = delete;
  ~Registered() { release(); }
  void release() {
    if (slot_ >= 0) g_used[slot_].store(0);
    slot_ = -1;
  }

 private:
  int slot_ = -1;
};

// Blocks the cleanup signals for a scope (the commit: a handful of renames
// that must finish or be rolled back as a whole).
class SignalsBlocked {
 public:
  SignalsBlocked() {
    sigset_t s;
    sigemptyset(&s);
    for (int sig : kCleanupSignals) sigaddset(&s, sig);
    ::sigprocmask(SIG_BLOCK, &s, &old_);
  }
  ~SignalsBlocked() { ::sigprocmask(SIG_SETMASK, &old_, nullptr); }
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

std::string_view kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// An existing target must be a regular file we may write (symlinks followed).
void check_target(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // new file (or a dangling symlink, replaced like a file)
    fail(path, fmt::format("cannot write: {}", errno_text(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    fail(path, fmt::format("not replaced: it is {}, not a regular file", kind_of(st.st_mode)));
  }
  if ((st.st_mode & 0222) == 0 || ::access(path.c_str(), W_OK) != 0) {
    fail(path, fmt::format("not replaced: the file is read-only (mode {:04o}); remove it or make it writable",
                           st.st_mode & 07777));
  }
}

std::string dir_of(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

std::string name_of(const std::string& path) { return std::filesystem::path(path).filename().string(); }

bool pid_alive(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

// Removes temp files of `target` left by processes that no longer exist.
void clean_stale(const std::string& target) {
  const std::string dir = dir_of(target), name = name_of(target);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const long pid = temp_owner(e->d_name, name);
    if (pid > 0 && pid != ::getpid() && !pid_alive(pid)) stale.push_back((std::filesystem::path(dir) / e->d_name).string());
  }
  ::closedir(d);
  for (const auto& s : stale) ::unlink(s.c_str());
}

// Creates ".NAME.moekit-PID-N.tmp" beside `target`, registered before it exists.
int create_temp(const std::string& target, std::string& tmp, std::vector<Registered>& regs) {
  static std::atomic<unsigned> counter{0};
  const std::string dir = dir_of(target);
  for (int attempt = 0;; ++attempt) {
    tmp = (std::filesystem::path(dir) / fmt::format(".{}.moekit-{}-{}.tmp", name_of(target), ::getpid(), counter++))
              .string();
    regs.emplace_back(target, tmp);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    const int e = errno;
    regs.pop_back();
    if (e != EEXIST || attempt >= 100) {
      fail(target, fmt::format("cannot write: cannot create a temporary file in '{}': {}", display_path(dir),
                               errno_text(e)));
    }
  }
}

void write_all(int fd, const void* src, std::size_t n) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t put = ::write(fd, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (put < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category());
    }
    p += put;
    n -= static_cast<std::size_t>(put);
  }
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

// One member of a set being written.
struct Pending {
  std::string target, temp, backup;
  bool moved = false;     // the backup was made by renaming the target away
  bool replaced = false;  // temp renamed over target
};

}  // namespace

long temp_owner(std::string_view f, std::string_view target) {
  const std::string_view mid = ".moekit-";
  if (f.size() < 1 + target.size() + mid.size() || f[0] != '.' || f.substr(1, target.size()) != target) return -1;
  f.remove_prefix(1 + target.size());
  if (f.substr(0, mid.size()) != mid) return -1;
  f.remove_prefix(mid.size());
  long pid = 0;
  auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), pid);
  if (ec != std::errc() || pid <= 0 || p == f.data() + f.size() || *p != '-') return -1;
  std::string_view rest(p + 1, static_cast<std::size_t>(f.data() + f.size() - (p + 1)));
  std::size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0) return -1;
  rest.remove_prefix(digits);
  if (rest != ".tmp" && rest != "b.tmp") return -1;
  return pid;
}

void write_set(const std::vector<File>& files) {
  // 1. Everything that can be checked before touching the disk.
  std::vector<std::string> headers;
  std::set<std::string> seen;
  for (const auto& f : files) {
    if (!seen.insert(f.path).second) fail(f.path, "cannot write: the same file twice in one output set");
    headers.push_back(f.array ? npy::encode_header(f.path, *f.array) : std::string());
  }
  for (const auto& f : files) check_target(f.path);
  install_handlers();
  for (const auto& f : files) clean_stale(f.path);

  // 2. Every temp file, complete and synced. On error all of them go.
  // (`blocked` outlives `regs`: registrations end before signals come back.)
  std::optional<SignalsBlocked> blocked;
  std::vector<Registered> regs;
  std::vector<Pending> set;
  const auto drop_temps = [&] {
    for (const auto& p : set)
      if (!p.temp.empty()) ::unlink(p.temp.c_str());
  };
  for (std::size_t i = 0; i < files.size(); ++i) {
    set.push_back({files[i].path, "", "", false, false});
    int fd = -1;
    try {
      fd = create_temp(files[i].path, set.back().temp, regs);
    } catch (...) {
      set.back().temp.clear();
      drop_temps();
      throw;
    }
    try {
      write_all(fd, headers[i].data(), headers[i].size());
      if (files[i].array) write_all(fd, files[i].array->data.data(), files[i].array->data.size());
      else write_all(fd, files[i].bytes->data(), files[i].bytes->size());
      if (::fsync(fd) != 0) throw std::system_error(errno, std::generic_category());
      const int rc = ::close(fd);
      fd = -1;
      if (rc != 0) throw std::system_error(errno, std::generic_category());
    } catch (const std::system_error& e) {
      if (fd >= 0) ::close(fd);
      drop_temps();
      fail(files[i].path, fmt::format("cannot write: {}", errno_text(e.code().value())));
    }
  }
  if (testing::after_temps_written) {
    std::vector<std::string> temps;
    for (const auto& p : set) temps.push_back(p.temp);
    testing::after_temps_written(temps);
  }

  // 3. Commit. Signals wait until the set is whole again (new or old).
  blocked.emplace();
  for (std::size_t i = 0; i < set.size(); ++i) {
    auto& p = set[i];
    // The previous file stays reachable under a temp name until the commit ends.
    std::string backup = (std::filesystem::path(dir_of(p.target)) /
                          fmt::format(".{}.moekit-{}-{}b.tmp", name_of(p.target), ::getpid(), i))
                             .string();
    ::unlink(backup.c_str());  // ours from an earlier set of this process, if any
    regs.emplace_back(p.target, backup);
    if (::link(p.target.c_str(), backup.c_str()) == 0) {
      p.backup = std::move(backup);
    } else if (errno != ENOENT && ::rename(p.target.c_str(), backup.c_str()) == 0) {
      // No hard links here: the target is absent for a moment, but the set
      // stays all-or-nothing.
      p.backup = std::move(backup);
      p.moved = true;
    }
  }
  for (std::size_t i = 0; i < set.size(); ++i) {
    if (testing::rename_fn(set[i].temp.c_str(), set[i].target.c_str()) == 0) {
      set[i].replaced = true;
      continue;
    }
    const int e = errno;
    // Roll back: previous contents back in place, new files removed.
    std::string lost;
    for (auto& p : set) {
      if (!p.replaced) ::unlink(p.temp.c_str());
      bool ok = true;
      if (p.replaced && !p.backup.empty()) ok = ::rename(p.backup.c_str(), p.target.c_str()) == 0;
      else if (p.replaced) ok = ::unlink(p.target.c_str()) == 0;
      else if (p.moved) ok = ::rename(p.backup.c_str(), p.target.c_str()) == 0;
      else if (!p.backup.empty()) ::unlink(p.backup.c_str());
      if (!ok && !p.backup.empty() && lost.empty()) {
        lost = fmt::format("; could not restore {} (its previous contents are in {})", display_path(p.target),
                           display_path(p.backup));
        regs.clear();  // that backup must survive a signal now
      }
    }
    fail(set[i].target, fmt::format("cannot write: {}; no output of this run was kept{}", errno_text(e),
                                    lost.empty() ? ", the previous files are unchanged" : lost));
  }
  for (const auto& p : set)
    if (!p.backup.empty()) ::unlink(p.backup.c_str());
  std::set<std::string> dirs;
  for (const auto& p : set) dirs.insert(dir_of(p.target));
  for (const auto& d : dirs) fsync_dir(d);
}

void write_file(const std::string& path, const npy::Array& a) { write_set({{path, &a}}); }

void write_text_file(const std::string& path, const std::string& contents) {
  write_set({{path, nullptr, &contents}});
}

std::vector<std::string> write_folder(const std::string& dir,
                                      const std::vector<std::pair<std::string, const npy::Array*>>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(dir, fmt::format("cannot create output folder: {}", ec.message()));
  std::vector<File> set;
  std::vector<std::string> paths;
  for (const auto& [name, arr] : files) {
    paths.push_back((std::filesystem::path(dir) / name).string());
    set.push_back({paths.back(), arr});
  }
  write_set(set);
  return paths;
}

}  // namespace moekit::outputs
