// Unit tests behind the hostile-input suite: the output-set writer's rollback
// and signal cleanup (through its test seams), and the JSON and path escapers.
// (The generators are tested in tests/<family>/cpu_gen.cpp.)
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "display.hpp"
#include "errors.hpp"
#include "half.hpp"
#include "json.hpp"
#include "npy.hpp"
#include "outputs.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace moekit;
using moekit::testing::TempDir;

namespace {

npy::Array i32(std::vector<std::int32_t> v) {
  npy::Array a;
  a.dtype = npy::DType::i4;
  a.shape = {static_cast<std::int64_t>(v.size())};
  a.data.resize(v.size() * 4);
  std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

// Restores the writer's seams whatever a test does.
struct Seams {
  ~Seams() {
    outputs::testing::rename_fn = ::rename;
    outputs::testing::after_temps_written = nullptr;
    outputs::testing::lock_wait_seconds = 60;
  }
};

int g_renames = 0;
int g_fail_at = 0;
int rename_failing_at(const char* from, const char* to) {
  if (++g_renames == g_fail_at) {
    errno = EIO;
    return -1;
  }
  return ::rename(from, to);
}
// Something takes the target's place between the checks and the commit.
int rename_after_dir_appears(const char* from, const char* to) {
  if (++g_renames == g_fail_at) {
    ::unlink(to);
    ::mkdir(to, 0755);
  }
  return ::rename(from, to);
}

}  // namespace

// ---------------------------------------------------------------- output sets
TEST_CASE("output set: a failed rename rolls back to the previous set and removes every temp") {
  Seams seams;
  for (const bool dir_race : {false, true}) {
    for (int fail_at = 1; fail_at <= 3; ++fail_at) {
      CAPTURE(dir_race);
      CAPTURE(fail_at);
      TempDir dir;
      const auto a1 = i32({1, 2, 3}), b1 = i32({4}), c1 = i32({5, 6});
      const auto a2 = i32({7}), b2 = i32({8, 9}), c2 = i32({10, 11, 12});
      outputs::write_folder(dir.path.string(), {{"a.npy", &a1}, {"b.npy", &b1}, {"c.npy", &c1}});
      const auto before = dir.snapshot();
      REQUIRE(before.size() == 3);
      g_renames = 0;
      g_fail_at = fail_at;
      outputs::testing::rename_fn = dir_race ? rename_after_dir_appears : rename_failing_at;
      std::string msg;
      try {
        outputs::write_folder(dir.path.string(), {{"a.npy", &a2}, {"b.npy", &b2}, {"c.npy", &c2}});
        FAIL("a failed commit did not throw");
      } catch (const InputError& e) {
        msg = e.what();
      }
      outputs::testing::rename_fn = ::rename;
      CAPTURE(msg);
      CHECK(msg.find("no output of this run was kept") != std::string::npos);
      auto after = dir.snapshot();
      if (dir_race) {
        // The directory that appeared is not ours to remove; the rest is the old set.
        const std::string name = std::string(1, static_cast<char>('a' + fail_at - 1)) + ".npy";
        CHECK(after[name] == "<dir>");
        after[name] = before.at(name);
      }
      CHECK(after == before);
    }
  }
}

TEST_CASE("output set: a failed commit of new files leaves nothing") {
  Seams seams;
  TempDir dir;
  const auto a = i32({1}), b = i32({2});
  g_renames = 0;
  g_fail_at = 2;
  outputs::testing::rename_fn = rename_failing_at;
  CHECK_THROWS_AS(outputs::write_folder(dir.path.string(), {{"a.npy", &a}, {"b.npy", &b}}), InputError);
  CHECK(dir.snapshot().empty());
}

TEST_CASE("output set: a refused target stops the set before anything is written") {
  TempDir dir;
  const auto a1 = i32({1}), a2 = i32({2});
  outputs::write_folder(dir.path.string(), {{"a.npy", &a1}, {"b.npy", &a1}});
  fs::remove(dir.path / "b.npy");
  fs::create_directory(dir.path / "b.npy");
  const auto before = dir.snapshot();
  CHECK_THROWS_AS(outputs::write_folder(dir.path.string(), {{"a.npy", &a2}, {"b.npy", &a2}}), InputError);
  CHECK(dir.snapshot() == before);
}

namespace {
int g_pipe_fd = -1;
void announce_and_wait(const std::vector<std::string>&) {
  const char c = 'x';
  (void)::write(g_pipe_fd, &c, 1);
  for (;;) ::pause();
}

using Files = std::vector<std::pair<std::string, const npy::Array*>>;

// Forks a child (with `sig` at its default action, as in a fresh process)
// that writes `files` into `dir` as one set and stops once every temp is
// written; then sends it `sig`. Returns the folder's entry count while the
// child was stopped and the child's wait status.
std::pair<std::size_t, int> signal_while_committing(const TempDir& dir, int sig, const Files& files) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(p[0]);
    g_pipe_fd = p[1];
    ::signal(sig, SIG_DFL);
    outputs::testing::after_temps_written = announce_and_wait;
    try {
      outputs::write_folder(dir.path.string(), files);
    } catch (...) {
    }
    ::_exit(0);
  }
  ::close(p[1]);
  char c = 0;
  REQUIRE(::read(p[0], &c, 1) == 1);  // every temp is written now
  ::close(p[0]);
  const std::size_t entries = dir.snapshot().size();
  REQUIRE(::kill(child, sig) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return {entries, status};
}
}  // namespace

TEST_CASE("output set: SIGINT / SIGTERM / SIGHUP while writing remove the temp files") {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    CAPTURE(sig);
    TempDir dir;
    const auto old = i32({1, 2});
    outputs::write_folder(dir.path.string(), {{"a.npy", &old}, {"b.npy", &old}});
    const auto before = dir.snapshot();
    const auto big = i32(std::vector<std::int32_t>(100000, 7));
    const auto [entries, status] = signal_while_committing(dir, sig, {{"a.npy", &big}, {"b.npy", &big}});
    CHECK(entries == 4);  // both temps beside both files
    CHECK(WIFSIGNALED(status));
    if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == sig);
    CHECK(dir.snapshot() == before);
  }
}

TEST_CASE("output set: stale temps of dead processes are removed, live ones kept") {
  TempDir dir;
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  REQUIRE(::waitpid(dead, nullptr, 0) == dead);
  const pid_t live = ::getppid();
  const std::string stale = fmt::format(".x.npy.moekit-{}-3.tmp", dead);
  const std::string stale_backup = fmt::format(".x.npy.moekit-{}-0b.tmp", dead);
  const std::string busy = fmt::format(".x.npy.moekit-{}-0.tmp", live);
  const std::string other = fmt::format(".y.npy.moekit-{}-0.tmp", dead);  // not a target of this run
  for (const auto& n : {stale, stale_backup, busy, other}) std::ofstream(dir.file(n)) << "junk";
  const auto a = i32({1});
  outputs::write_file(dir.file("x.npy"), a);
  const auto left = dir.snapshot();
  CHECK(left.count("x.npy") == 1);
  CHECK(left.count(stale) == 0);
  CHECK(left.count(stale_backup) == 0);
  CHECK(left.count(busy) == 1);
  CHECK(left.count(other) == 1);

  CHECK(outputs::temp_owner(".x.npy.moekit-123-4.tmp", "x.npy") == 123);
  CHECK(outputs::temp_owner(".x.npy.moekit-123-4b.tmp", "x.npy") == 123);
  for (const char* no : {"x.npy", ".x.npy.moekit-123-4.tmpx", ".x.npy.moekit--4.tmp", ".x.npy.moekit-123-.tmp",
                         ".y.npy.moekit-123-4.tmp", ".x.npy.moekit-0-4.tmp", ".x.npy.123.4.abc.tmp"})
    CHECK(outputs::temp_owner(no, "x.npy") == -1);
}

namespace {
// A set of `n` files "f<i>.npy", each holding {i + salt}.
struct ManyFiles {
  std::vector<npy::Array> arrays;
  std::vector<std::pair<std::string, const npy::Array*>> files;
  ManyFiles(int n, int salt) {
    arrays.reserve(n);
    for (int i = 0; i < n; ++i) {
      arrays.push_back(i32({i + salt}));
      files.emplace_back(fmt::format("f{}.npy", i), &arrays.back());
    }
  }
};
}  // namespace

TEST_CASE("output set: any number of files (no fixed table), replaced as a set") {
  for (const int n : {33, 64, 300}) {
    CAPTURE(n);
    TempDir dir;
    const ManyFiles a(n, 0), b(n, 1000);
    REQUIRE(outputs::write_folder(dir.path.string(), a.files).size() == std::size_t(n));
    REQUIRE(outputs::write_folder(dir.path.string(), b.files).size() == std::size_t(n));
    const auto after = dir.snapshot();
    CHECK(after.size() == std::size_t(n));  // no temp, backup or lock file left
    TempDir ref;
    outputs::write_folder(ref.path.string(), b.files);
    CHECK(after == ref.snapshot());
  }
}

TEST_CASE("output set: SIGINT with hundreds of temps written removes every one") {
  TempDir dir;
  const ManyFiles old(200, 0);
  outputs::write_folder(dir.path.string(), old.files);
  const auto before = dir.snapshot();
  const ManyFiles next(200, 7);
  const auto [entries, status] = signal_while_committing(dir, SIGINT, next.files);
  CHECK(entries == 400);  // 200 temps beside the 200 files
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGINT));
  CHECK(dir.snapshot() == before);
}

TEST_CASE("output set: a second writer of the folder commits only after the first lets go of it") {
  // While the first set is in place and its caller reads it back (while_locked),
  // another process writing the same folder waits; then its whole set replaces it.
  TempDir dir;
  const ManyFiles first(5, 0), second(5, 100);
  TempDir ref1, ref2;
  outputs::write_folder(ref1.path.string(), first.files);
  outputs::write_folder(ref2.path.string(), second.files);
  pid_t child = -1;
  std::map<std::string, std::string> seen_inside;
  outputs::write_folder(dir.path.string(), first.files, [&](const std::vector<std::string>& paths) {
    CHECK(paths.size() == 5);
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      int rc = 0;
      try {
        outputs::write_folder(dir.path.string(), second.files);
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    // Long enough for the child to write its temps and reach the commit.
    for (int i = 0; i < 40; ++i) {
      ::usleep(10000);
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) FAIL("the second writer did not wait for the lock");
    }
    seen_inside = dir.snapshot();
  });
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  // Inside: our five files (and the temps of the waiting writer, and the lock file).
  for (const auto& [name, bytes] : ref1.snapshot()) CHECK(seen_inside[name] == bytes);
  CHECK(seen_inside.count(".moekit.lock") == 1);
  CHECK(dir.snapshot() == ref2.snapshot());  // then the second set, whole; no lock file left
}

TEST_CASE("output set: a writer that cannot get the folder's lock gives up, naming the holder, with no temp left") {
  Seams seams;
  TempDir dir;
  const ManyFiles first(3, 0), second(3, 50);
  std::map<std::string, std::string> inside;
  std::string child_msg;
  outputs::write_folder(dir.path.string(), first.files, [&](const std::vector<std::string>&) {
    inside = dir.snapshot();
    int p[2];
    REQUIRE(::pipe(p) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(p[0]);
      outputs::testing::lock_wait_seconds = 0;
      std::string msg = "no error";
      try {
        outputs::write_folder(dir.path.string(), second.files);
      } catch (const InputError& e) {
        msg = e.what();
      }
      (void)!::write(p[1], msg.data(), msg.size());
      ::_exit(0);
    }
    ::close(p[1]);
    char buf[1024];
    ssize_t n = 0;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) child_msg.append(buf, static_cast<std::size_t>(n));
    ::close(p[0]);
    REQUIRE(::waitpid(child, nullptr, 0) == child);
    CHECK(dir.snapshot() == inside);  // the child's temps are gone, our set untouched
  });
  CAPTURE(child_msg);
  CHECK(child_msg.find(fmt::format("another moekit process (pid {}) has been writing this folder", ::getpid())) !=
        std::string::npos);
  CHECK(dir.snapshot().size() == 3);
}

// ---------------------------------------------------------------- escapers
TEST_CASE("json_quote: control characters escaped, invalid UTF-8 as surrogate escapes") {
  CHECK(json_quote("plain") == "\"plain\"");
  CHECK(json_quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json_quote("t\tn\nr\r\x1b[0m\x7f") == "\"t\\tn\\nr\\r\\u001b[0m\\u007f\"");
  CHECK(json_quote(std::string("nul\0x", 5)) == "\"nul\\u0000x\"");
  CHECK(json_quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  CHECK(json_quote("\xc2\x9b") == "\"\\u009b\"");  // C1 CSI
  CHECK(json_quote("\xe2\x80\xa8") == "\"\\u2028\"");
  CHECK(json_quote("a\xff" "b") == "\"a\\udcffb\"");
  CHECK(json_quote("\xc3") == "\"\\udcc3\"");                                 // truncated
  CHECK(json_quote("\xc0\xaf") == "\"\\udcc0\\udcaf\"");                      // overlong
  CHECK(json_quote("\xed\xa0\x80") == "\"\\udced\\udca0\\udc80\"");           // UTF-8 surrogate
  CHECK(json_quote("\xf4\x90\x80\x80") == "\"\\udcf4\\udc90\\udc80\\udc80\"");  // past U+10FFFF
}

TEST_CASE("display_path: one printable line") {
  CHECK(display_path("out/x.npy") == "out/x.npy");
  CHECK(display_path("a\nb") == "a\\x0ab");
  CHECK(display_path("\x1b[31mred") == "\\x1b[31mred");
  CHECK(display_path("back\\slash") == "back\\x5cslash");
  CHECK(display_path("donn\xc3\xa9" "es") == "donn\xc3\xa9" "es");
  CHECK(display_path("\xc2\x9b" "2J") == "\\xc2\\x9b2J");          // C1 CSI
  CHECK(display_path("\xe2\x80\xae" "txt") == "\\xe2\\x80\\xaetxt");  // bidi override
  CHECK(display_path("\xff\xfe") == "\\xff\\xfe");
  CHECK(printable("abcdef", 3) == "abc...");
  // noncharacters are no XML characters (an SVG holding one is invalid): escaped
  CHECK(display_path("a\xef\xbf\xbf" "b\xef\xbf\xbe") == "a\\xef\\xbf\\xbfb\\xef\\xbf\\xbe");
  CHECK(display_path("\xf0\x9f\xbf\xbe") == "\\xf0\\x9f\\xbf\\xbe");  // U+1FFFE
  CHECK(display_path("\xef\xbf\xbd") == "\xef\xbf\xbd");                  // U+FFFD is a character
}

TEST_CASE("one_line: the last guard keeps printable text as it is") {
  for (const char* s : {"plain", "a\\x0ab", "caf\xc3\xa9", "back\\slash"}) CHECK(one_line(s) == s);
  CHECK(one_line("a\nb\x1b[2J") == "a\\x0ab\\x1b[2J");
  CHECK(one_line("\xc2\x9b\xff") == "\\xc2\\x9b\\xff");
  CHECK(one_line(printable("x\ny\\z")) == printable("x\ny\\z"));
}
