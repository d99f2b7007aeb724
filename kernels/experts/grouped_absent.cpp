// The `grouped` variant where this build has no sm_90a kernels for it
// (grouped.hpp): without the CUTLASS headers (meson option cutlass_dir; the
// README's set-up step installs them), or without 90 in gpu_arch. Its row
// stays in the registry and says why it does not apply.
#include "experts/grouped.hpp"

namespace moekit::experts::grouped {

const char* not_built() {
#if defined(MOEKIT_GROUPED_NO_SM90)
  return "not built: gpu_arch has no 90 (sm_90a kernels)";
#else
  return "not built: no CUTLASS headers (meson option cutlass_dir; `make deps` installs them into build-deps/cutlass)";
#endif
}
const char* limits_text() { return not_built(); }
const char* not_applicable(const Problem&, const DeviceCaps&) { return not_built(); }
std::size_t workspace_bytes(const Problem&, const DeviceCaps&) { return 0; }
LaunchStatus launch(const Problem&, const Buffers&, void*, Stream, bool) { return 98; }  // cudaErrorInvalidDeviceFunction

}  // namespace moekit::experts::grouped
