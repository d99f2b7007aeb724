// Writing .npy outputs safely: a run's output set (any number of files) is
// replaced as a whole or not at all, two processes writing the same files at
// once commit one after the other (a lock per folder), temp files never
// outlive the process (SIGINT/SIGTERM/SIGHUP included), and targets that are
// not plain writable files are refused. Errors throw InputError "PATH:
// problem" (exit 2). See docs/npy.md.
#pragma once

#include <functional>
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
// them all while holding the lock of each folder of the set
// (FOLDER/.moekit.lock, flock); if a rename fails, the targets already
// replaced get their previous contents back (or are removed when they did not
// exist) and every temp file is removed. `while_locked`, when given, runs once
// the set is in place and before the locks are let go: what it reads of the
// set is this run's, whatever other processes write there.
void write_set(const std::vector<File>& files, const std::function<void()>& while_locked = {});

// `gen -o`: a set of one.
void write_file(const std::string& path, const npy::Array& a);
// A text file (`plot -o`), with the same guarantees.
void write_text_file(const std::string& path, const std::string& contents);

// `--out DIR`: creates DIR (and parents) if missing, writes DIR/NAME for each
// (NAME, array) as one set and returns the paths written, in order.
// `while_locked(paths)` as in write_set.
std::vector<std::string> write_folder(
    const std::string& dir, const std::vector<std::pair<std::string, const npy::Array*>>& files,
    const std::function<void(const std::vector<std::string>&)>& while_locked = {});

// Whether two paths name the same existing file (same device and inode: other
// spellings, symlinks and hard links included). False when either is missing.
bool same_file(const std::string& a, const std::string& b);
// A command's output must never replace one of its inputs: throws
// "TARGET: not written: it is the input INPUT" (exit 2) for the first target
// that names one of `inputs`. Called before anything is written.
void refuse_inputs_as_targets(const std::vector<std::string>& targets, const std::vector<std::string>& inputs);

// Temp names are ".NAME.moekit-PID-N.tmp" beside NAME. If `file_name` is one
// for `target_name`, returns its PID, else -1. A run removes the temp files of
// its targets whose PID is no longer alive (left by a crash or SIGKILL).
long temp_owner(std::string_view file_name, std::string_view target_name);

// Test seams: the rename used to commit a set, and a callback run once all temp
// files of a set are written (before any rename). Production leaves them alone.
// `lock_wait_seconds`: how long a commit waits for a folder's lock (60).
namespace testing {
extern int (*rename_fn)(const char* from, const char* to);
extern void (*after_temps_written)(const std::vector<std::string>& temps);
extern int lock_wait_seconds;
}  // namespace testing

}  // namespace moekit::outputs
