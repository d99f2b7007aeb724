// Output sets: validate every target, write temps, commit with renames (rolled
// back on failure), and unlink registered temps from a signal handler.
#include "outputs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
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
int lock_wait_seconds = 60;  // then exit 2 rather than hang behind a stopped process
}  // namespace testing

namespace {

[[noreturn]] void fail(const std::string& path, std::string_view what) {
  throw InputError(fmt::format("{}: {}", display_path(path), what));
}

std::string errno_text(int e) { return std::strerror(e); }

// ---------------------------------------------------------------------------
// Temp-file registry read by the signal handler: a list of nodes that only
// grows (a set of any size registers as many nodes as it has temps at once),
// each node reused once released. The handler walks it with lock-free atomic
// loads and calls only unlink(): it may run at any point of the main thread,
// so a node is published (state 1) only once its path is complete, and never
// freed.
// ---------------------------------------------------------------------------
constexpr std::size_t kPathMax = 4096;
struct Node {
  std::atomic<int> state{0};  // 0 free, 2 being filled, 1 registered (unlinked by the handler)
  char* path = nullptr;
  std::size_t capacity = 0;
  Node* next = nullptr;  // set before the node is published, never changed after
};
std::atomic<Node*> g_head{nullptr};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<Node*>::is_always_lock_free);
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temps_and_die(int sig) {
  for (Node* n = g_head.load(); n; n = n->next)
    if (n->state.load() == 1) ::unlink(n->path);
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
    for (Node* n = g_head.load(); n; n = n->next) {
      int free_state = 0;
      if (n->capacity > path.size() && n->state.compare_exchange_strong(free_state, 2)) {
        node_ = n;
        break;
      }
    }
    if (!node_) {
      node_ = new Node;  // kept for the process's life: the handler may be walking the list
      node_->capacity = std::max<std::size_t>(path.size() + 1, 256);
      node_->path = new char[node_->capacity];
      node_->state.store(2);
      node_->next = g_head.load();
      while (!g_head.compare_exchange_weak(node_->next, node_)) {
      }
    }
    std::memcpy(node_->path, path.c_str(), path.size() + 1);
    node_->state.store(1);
  }
  Registered(Registered&& o) noexcept : node_(std::exchange(o.node_, nullptr)) {}
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;
  Registered& operator=(Registered&&) = delete;
  ~Registered() { release(); }
  void release() {
    if (node_) node_->state.store(0);
    node_ = nullptr;
  }

 private:
  Node* node_ = nullptr;
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

// ---------------------------------------------------------------------------
// Folder locks. A set's commit (and what its caller reads back of it) holds an
// exclusive flock() on FOLDER/.moekit.lock of every folder it writes, taken in
// one global order (device, inode), so two processes writing the same files
// commit one after the other: the files end as one run's set or the other's,
// never a mix. The holder removes the lock file before it lets go; a waiter
// that then gets the lock of a removed file opens the new one and waits again.
// ---------------------------------------------------------------------------
constexpr const char* kLockName = ".moekit.lock";

class FolderLocks {
 public:
  explicit FolderLocks(const std::vector<std::string>& dirs) {
    std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> order;
    for (const auto& d : dirs) {
      struct stat st {};
      if (::stat(d.c_str(), &st) != 0) fail(d, fmt::format("cannot write: {}", errno_text(errno)));
      order.push_back({{st.st_dev, st.st_ino}, d});
    }
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end(), [](auto& a, auto& b) { return a.first == b.first; }),
                order.end());
    try {
      for (const auto& [id, d] : order) lock(d);
    } catch (...) {
      release();  // the folders locked before the one that failed
      throw;
    }
  }
  FolderLocks(const FolderLocks&) = delete;
  FolderLocks& operator=(const FolderLocks&) = delete;
  ~FolderLocks() { release(); }

 private:
  struct Held {
    std::string path;
    int fd;
    Registered reg;  // a signal removes the lock file too (the kernel drops the lock)
  };
  std::vector<Held> held_;

  void release() {
    for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
      ::unlink(it->path.c_str());  // still locked: no one else may hold this file now
      ::close(it->fd);
    }
    held_.clear();
  }

  void lock(const std::string& dir) {
    const std::string path = (std::filesystem::path(dir) / kLockName).string();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(testing::lock_wait_seconds);
    for (int wait_ms = 1;;) {
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
      // Another user's lock file (a shared folder such as /tmp): flock needs no write access.
      if (fd < 0 && errno == EACCES) fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) fail(path, fmt::format("cannot write: cannot open the folder's lock file: {}", errno_text(errno)));
      struct stat a {}, b {};
      if (::fstat(fd, &a) != 0 || !S_ISREG(a.st_mode)) {
        ::close(fd);
        fail(path, "cannot write: the folder's lock file is not a regular file");
      }
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        if (::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
          Registered reg(path, path);
          held_.push_back({path, fd, std::move(reg)});
          const std::string pid = std::to_string(::getpid()) + "\n";  // for the message of a waiter
          (void)!::ftruncate(fd, 0);
          (void)!::pwrite(fd, pid.data(), pid.size(), 0);
          return;
        }
        ::close(fd);  // its holder removed it: lock the one now there
        continue;
      }
      const int e = errno;
      if (e != EWOULDBLOCK && e != EINTR) {
        // A file system without flock (ENOLCK, EOPNOTSUPP): written unlocked, as
        // before locks existed (docs/npy.md).
        ::close(fd);
        ::unlink(path.c_str());
        return;
      }
      if (std::chrono::steady_clock::now() > give_up) {
        char buf[32] = {};
        const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
        ::close(fd);
        long holder = 0;
        if (n > 0) std::from_chars(buf, buf + n, holder);
        fail(dir, fmt::format("cannot write: another moekit process (pid {}) has been writing this folder for "
                              "{} s (its lock file {})",
                              holder > 0 ? std::to_string(holder) : std::string("unknown"), testing::lock_wait_seconds,
                              kLockName));
      }
      ::close(fd);
      ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
      wait_ms = std::min(wait_ms * 2, 50);
    }
  }
};

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

void write_set(const std::vector<File>& files, const std::function<void()>& while_locked) {
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

  // 3. Commit, one process at a time per folder (FolderLocks). Signals wait
  // until the set is whole again (new or old).
  std::set<std::string> dirs;
  for (const auto& p : set) dirs.insert(dir_of(p.target));
  std::optional<FolderLocks> locks;
  try {
    locks.emplace(std::vector<std::string>(dirs.begin(), dirs.end()));
  } catch (...) {
    drop_temps();
    throw;
  }
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
  for (const auto& d : dirs) fsync_dir(d);
  // The set is in place; the caller reads it back before another process may replace it.
  regs.clear();
  blocked.reset();
  if (while_locked) while_locked();
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat x {}, y {};
  return ::stat(a.c_str(), &x) == 0 && ::stat(b.c_str(), &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

void refuse_inputs_as_targets(const std::vector<std::string>& targets, const std::vector<std::string>& inputs) {
  for (const auto& t : targets)
    for (const auto& in : inputs)
      if (same_file(t, in))
        fail(t, fmt::format("not written: it is the input {} of this command; write to another file",
                            display_path(in)));
}

void write_file(const std::string& path, const npy::Array& a) { write_set({{path, &a}}); }

void write_text_file(const std::string& path, const std::string& contents) {
  write_set({{path, nullptr, &contents}});
}

std::vector<std::string> write_folder(const std::string& dir,
                                      const std::vector<std::pair<std::string, const npy::Array*>>& files,
                                      const std::function<void(const std::vector<std::string>&)>& while_locked) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(dir, fmt::format("cannot create output folder: {}", ec.message()));
  std::vector<File> set;
  std::vector<std::string> paths;
  for (const auto& [name, arr] : files) {
    paths.push_back((std::filesystem::path(dir) / name).string());
    set.push_back({paths.back(), arr});
  }
  write_set(set, while_locked ? std::function<void()>([&] { while_locked(paths); }) : std::function<void()>());
  return paths;
}

}  // namespace moekit::outputs
