// NCCL loaded at run time, peer access, and the ranks' streams and events (comm.hpp).
#include "ep/comm.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <type_traits>

// Without NCCL's header at build time (the meson option nccl_dir, else the
// system's), `ep` builds, and nccl-a2a says at run time that NCCL is missing.
#if __has_include(<nccl.h>)
#include <nccl.h>
#define MOEKIT_HAVE_NCCL 1
#else
#define MOEKIT_HAVE_NCCL 0
#endif

#ifndef MOEKIT_NCCL_LIB_DEFAULT
#define MOEKIT_NCCL_LIB_DEFAULT ""
#endif

namespace moekit::ep {
namespace {

#if MOEKIT_HAVE_NCCL
// Only these entry points are used; the header (nvidia-nccl-cu13, the
// build's nccl_dir) gives their types.
struct Api {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclCommInitAll) init_all = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  std::string missing;  // empty when loaded
  int version = 0;
};

const Api& api() {
  static const Api a = [] {
    Api r;
    std::string tried;
    void* lib = nullptr;
    auto attempt = [&](const std::string& name) {
      if (lib != nullptr || name.empty()) return;
      lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) {
        const char* e = dlerror();
        tried += (tried.empty() ? "" : "; ") + (e != nullptr ? std::string(e) : name);
      }
    };
    if (const char* env = std::getenv("MOEKIT_NCCL_LIB")) attempt(env);
    attempt(MOEKIT_NCCL_LIB_DEFAULT);
    attempt("libnccl.so.2");
    if (lib == nullptr) {
      r.missing = "NCCL could not be loaded (" + tried +
                  "): set MOEKIT_NCCL_LIB to libnccl.so.2 (the nvidia-nccl-cu13 package's nvidia/nccl/lib) or put "
                  "its folder on LD_LIBRARY_PATH";
      return r;
    }
    auto sym = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
      if (f == nullptr && r.missing.empty()) r.missing = std::string("the loaded NCCL has no ") + name;
    };
    sym(r.get_version, "ncclGetVersion");
    sym(r.init_all, "ncclCommInitAll");
    sym(r.destroy, "ncclCommDestroy");
    sym(r.group_start, "ncclGroupStart");
    sym(r.group_end, "ncclGroupEnd");
    sym(r.send, "ncclSend");
    sym(r.recv, "ncclRecv");
    sym(r.error_string, "ncclGetErrorString");
    if (r.missing.empty() && r.get_version(&r.version) != ncclSuccess) r.missing = "ncclGetVersion failed";
    return r;
  }();
  return a;
}
#else
constexpr const char* kNoHeader =
    "moekit was built without NCCL's header: run `make deps` (it installs nvidia-nccl-cu13 into build-deps/nccl) "
    "and rebuild";
#endif

}  // namespace

std::string nccl_missing() {
#if MOEKIT_HAVE_NCCL
  return api().missing;
#else
  return kNoHeader;
#endif
}

std::string nccl_version() {
#if MOEKIT_HAVE_NCCL
  const Api& a = api();
  if (!a.missing.empty()) return "";
  // NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z from 2.9 on.
  return std::to_string(a.version / 10000) + "." + std::to_string(a.version / 100 % 100) + "." +
         std::to_string(a.version % 100);
#else
  return "";
#endif
}

namespace {

// The first pair (r, d) of GPUs 0 .. R-1, r != d, for which `lacks(r, d)`
// says why not; empty when none does.
template <class F>
std::string first_pair_lacking(int ranks, F lacks) {
  for (int r = 0; r < ranks; ++r)
    for (int d = 0; d < ranks; ++d)
      if (d != r)
        if (std::string why = lacks(r, d); !why.empty()) {
          (void)cudaGetLastError();  // a failed query is an answer, not an error to keep
          return why;
        }
  return "";
}

}  // namespace

std::string peer_access_missing(int ranks) {
  return first_pair_lacking(ranks, [](int r, int d) {
    int can = 0;
    return cudaDeviceCanAccessPeer(&can, r, d) != cudaSuccess || can == 0
               ? "GPU " + std::to_string(r) + " cannot map GPU " + std::to_string(d) + "'s memory (no peer access)"
               : std::string();
  });
}

std::string peer_atomics_missing(int ranks) {
  if (std::string why = peer_access_missing(ranks); !why.empty()) return why;
  return first_pair_lacking(ranks, [](int r, int d) {
    int native = 0;
    return cudaDeviceGetP2PAttribute(&native, cudaDevP2PAttrNativeAtomicSupported, r, d) != cudaSuccess || !native
               ? "GPU " + std::to_string(r) + " has no native atomics on GPU " + std::to_string(d) + "'s memory"
               : std::string();
  });
}

namespace {

// Peer access from every rank's device to every other one's; false where a
// pair cannot (peer_access_missing) or enabling fails.
bool enable_peers(int ranks) {
  if (!peer_access_missing(ranks).empty()) return false;
  for (int r = 0; r < ranks; ++r) {
    if (cudaSetDevice(r) != cudaSuccess) return false;
    for (int d = 0; d < ranks; ++d) {
      if (d == r) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(d, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else if (e != cudaSuccess) return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<Comm> Comm::create(int ranks, const std::array<Stream, kMaxRanks>& streams, std::string* error,
                                   bool with_nccl) {
  if (ranks < 1 || ranks > kMaxRanks) {
    *error = "ranks outside [1, " + std::to_string(kMaxRanks) + "]";
    return nullptr;
  }
  std::unique_ptr<Comm> c(new Comm());
  c->ranks_ = ranks;
  c->streams_ = streams;
  int prev = 0;
  cudaGetDevice(&prev);
  c->peers_ = enable_peers(ranks);
  if (!c->peers_) (void)cudaGetLastError();  // a refused pair is an answer, not an error to keep
  cudaSetDevice(prev);
#if MOEKIT_HAVE_NCCL
  const Api& a = api();
  if (!with_nccl) {
    c->nccl_unavailable_ = "not asked for (a variant without NCCL)";
  } else if (a.missing.empty()) {
    // NVLink multicast off, whatever the environment says (the lent machines
    // forbid it: it can take a shared host's GPUs out of service).
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    int devs[kMaxRanks];
    for (int r = 0; r < ranks; ++r) devs[r] = r;
    ncclComm_t comms[kMaxRanks] = {};
    const ncclResult_t res = a.init_all(comms, ranks, devs);
    cudaSetDevice(prev);
    if (res == ncclSuccess) {
      for (int r = 0; r < ranks; ++r) c->comms_[std::size_t(r)] = comms[r];
    } else {
      c->nccl_unavailable_ = std::string("ncclCommInitAll: ") + a.error_string(res);
      (void)cudaGetLastError();
    }
  } else {
    c->nccl_unavailable_ = a.missing;
  }
#else
  (void)with_nccl;
  c->nccl_unavailable_ = kNoHeader;
#endif
  if (cudaMallocHost(&c->pinned_, sizeof(std::int32_t) * kCountsPerRank * kMaxRanks) != cudaSuccess) {
    *error = "cudaMallocHost of the ranks' counts failed";
    return nullptr;
  }
  bool ok = cudaEventCreateWithFlags(reinterpret_cast<cudaEvent_t*>(&c->fork_), cudaEventDisableTiming) == cudaSuccess;
  for (int r = 0; r < ranks && ok; ++r)
    ok = cudaSetDevice(r) == cudaSuccess &&
         cudaEventCreateWithFlags(reinterpret_cast<cudaEvent_t*>(&c->join_[std::size_t(r)]),
                                  cudaEventDisableTiming) == cudaSuccess;
  cudaSetDevice(prev);
  if (!ok) {
    *error = "cudaEventCreate for the ranks' streams failed";
    return nullptr;
  }
  for (int r = 0; r < ranks && ok; ++r) {
    unsigned*& s = c->signals_[std::size_t(r)];
    ok = cudaSetDevice(r) == cudaSuccess && cudaMalloc(&s, sizeof(unsigned) * kSignals) == cudaSuccess &&
         cudaMemset(s, 0, sizeof(unsigned) * kSignals) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
  }
  cudaSetDevice(prev);
  if (!ok) {
    *error = "the ranks' signal counters could not be allocated";
    return nullptr;
  }
  return c;
}

Comm::~Comm() {
#if MOEKIT_HAVE_NCCL
  for (int r = 0; r < ranks_; ++r)
    if (comms_[std::size_t(r)] != nullptr) api().destroy(static_cast<ncclComm_t>(comms_[std::size_t(r)]));
#endif
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  if (fork_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(fork_));
  for (void* e : join_)
    if (e != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  for (unsigned* s : signals_)
    if (s != nullptr) cudaFree(s);
}

std::string Comm::signals_not_idle() const {
  static const char* const kNames[kSignals] = {"dispatch arrivals", "combine arrivals", "pack's finished blocks",
                                               "return's finished blocks"};
  int prev = 0;
  cudaGetDevice(&prev);
  std::string why;
  for (int r = 0; r < ranks_ && why.empty(); ++r) {
    unsigned v[kSignals] = {};
    if (cudaSetDevice(r) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(v, signals_[std::size_t(r)], sizeof v, cudaMemcpyDeviceToHost) != cudaSuccess) {
      why = "rank " + std::to_string(r) + "'s counters could not be read: " + cudaGetErrorString(cudaGetLastError());
      break;
    }
    for (int i = 0; i < kSignals && why.empty(); ++i)
      if (v[i] != 0) why = "rank " + std::to_string(r) + "'s " + kNames[i] + " counter is " + std::to_string(v[i]);
  }
  cudaSetDevice(prev);
  return why;
}

LaunchStatus Comm::reset_signals() const {
  int prev = 0;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSuccess;
  // Every rank's queued work first (a rank still running adds to its peers'
  // counters), then the zeroes, on the ranks' own streams.
  for (int r = 0; r < ranks_ && e == cudaSuccess; ++r)
    if ((e = cudaSetDevice(r)) == cudaSuccess) e = cudaDeviceSynchronize();
  for (int r = 0; r < ranks_ && e == cudaSuccess; ++r) {
    const auto s = reinterpret_cast<cudaStream_t>(streams_[std::size_t(r)]);
    if ((e = cudaSetDevice(r)) == cudaSuccess &&
        (e = cudaMemsetAsync(signals_[std::size_t(r)], 0, sizeof(unsigned) * kSignals, s)) == cudaSuccess)
      e = cudaStreamSynchronize(s);
  }
  cudaSetDevice(prev);
  return e;
}

#if MOEKIT_HAVE_NCCL
LaunchStatus Comm::fail(const char* what, int result) {
  if (result == ncclSuccess) return cudaSuccess;
  if (error_.empty()) error_ = std::string(what) + ": " + api().error_string(static_cast<ncclResult_t>(result));
  return cudaErrorUnknown;
}

LaunchStatus Comm::group_start() { return has_nccl() ? fail("ncclGroupStart", api().group_start()) : cudaErrorNotSupported; }
LaunchStatus Comm::group_end() { return has_nccl() ? fail("ncclGroupEnd", api().group_end()) : cudaErrorNotSupported; }

LaunchStatus Comm::send(int rank, int peer, const void* buf, std::size_t bytes) {
  if (!has_nccl()) return cudaErrorNotSupported;
  return fail("ncclSend", api().send(buf, bytes, ncclUint8, peer, static_cast<ncclComm_t>(comms_[std::size_t(rank)]),
                                     reinterpret_cast<cudaStream_t>(streams_[std::size_t(rank)])));
}

LaunchStatus Comm::recv(int rank, int peer, void* buf, std::size_t bytes) {
  if (!has_nccl()) return cudaErrorNotSupported;
  return fail("ncclRecv", api().recv(buf, bytes, ncclUint8, peer, static_cast<ncclComm_t>(comms_[std::size_t(rank)]),
                                     reinterpret_cast<cudaStream_t>(streams_[std::size_t(rank)])));
}
#else
LaunchStatus Comm::fail(const char*, int) { return cudaErrorNotSupported; }
LaunchStatus Comm::group_start() { return cudaErrorNotSupported; }
LaunchStatus Comm::group_end() { return cudaErrorNotSupported; }
LaunchStatus Comm::send(int, int, const void*, std::size_t) { return cudaErrorNotSupported; }
LaunchStatus Comm::recv(int, int, void*, std::size_t) { return cudaErrorNotSupported; }
#endif

}  // namespace moekit::ep
