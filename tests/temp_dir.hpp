// A fresh directory under $TMPDIR for a test, removed with its contents at
// scope exit; helpers to look at what a test left in it.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <system_error>
#include <vector>

namespace moekit::testing {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "moekit-test-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path / name).string(); }
  // Names of the entries, in directory order.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
    return out;
  }
  // name -> bytes of every entry (directories as "<dir>").
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> m;
    for (const auto& e : std::filesystem::directory_iterator(path)) {
      std::string bytes = "<dir>";
      if (e.is_regular_file()) {
        std::ifstream f(e.path(), std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(f), {});
      }
      m[e.path().filename().string()] = bytes;
    }
    return m;
  }
};

}  // namespace moekit::testing
