// The ranks of one ep launch: GPUs 0 .. R-1 of this process, a stream and an
// event per rank, peer access between them where the GPUs allow it, NCCL
// communicators where NCCL loads, and the counts the last NCCL dispatch
// exchanged (so that combine can run alone). NCCL is loaded at run time
// (dlopen), on the first Comm, so every other command works without it.
// Host-visible: no CUDA or NCCL headers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/variant.hpp"
#include "ep/ep.hpp"

namespace moekit::ep {

// Empty when NCCL is loaded (or loads now), else one line saying what is
// missing and where moekit looked (MOEKIT_NCCL_LIB, the build's nccl_dir,
// the loader's path).
std::string nccl_missing();
// "2.28.9" of the loaded library; empty when not loaded.
std::string nccl_version();
// Empty when each of GPUs 0 .. R-1 can map every other one's memory
// (cudaDeviceCanAccessPeer), else which pair cannot.
std::string peer_access_missing(int ranks);
// Empty when every pair of GPUs 0 .. R-1 has peer access and native atomics
// on each other's memory (cudaDevP2PAttrNativeAtomicSupported: NVLink), else
// which pair has not (p2p-signal's counters are raised over the link).
std::string peer_atomics_missing(int ranks);

class Comm {
 public:
  // Ranks 0 .. R-1 on devices 0 .. R-1, streams[r] the stream rank r's work
  // runs on (a stream of device r). Enables peer access between every pair
  // that allows it; creates NCCL communicators where NCCL loads (after
  // setting NCCL_NVLS_ENABLE=0: NVLink multicast stays off, the lent
  // machines forbid it), else nccl_unavailable() says why. nullptr and
  // *error when a CUDA call fails.
  // `with_nccl` false: no communicators (p2p needs none; NCCL's start-up
  // takes a while). A failing NCCL start-up is kept in nccl_unavailable(),
  // not an error: only nccl-a2a needs it.
  static std::unique_ptr<Comm> create(int ranks, const std::array<Stream, kMaxRanks>& streams, std::string* error,
                                      bool with_nccl = true);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int ranks() const { return ranks_; }
  bool has_nccl() const { return nccl_unavailable_.empty(); }
  const std::string& nccl_unavailable() const { return nccl_unavailable_; }
  bool has_peers() const { return peers_; }
  // p2p-signal's counters on rank r's GPU (kernels/ep/a2a.cuh's PeerSignal),
  // zero at create(); every launch leaves them zero again.
  enum Signal { kDispatchArrive, kCombineArrive, kPackDone, kBackDone, kSignals };
  unsigned* signal(int r, Signal which) const { return signals_[std::size_t(r)] + which; }
  // Empty when every counter is zero (as between launches), else the first
  // that is not; synchronizes every rank's GPU. A check for tests.
  std::string signals_not_idle() const;
  // Waits for every rank's queued work and zeroes the counters (after a
  // launch that failed half issued). cudaSuccess or the first CUDA error.
  LaunchStatus reset_signals() const;
  Stream stream(int r) const { return streams_[std::size_t(r)]; }

  // NCCL's grouped point-to-point calls (ncclGroupStart/End, ncclSend/Recv of
  // bytes on rank r's communicator and stream). A failure returns non-zero
  // (a cudaError_t: cudaErrorUnknown) and keeps NCCL's message in error().
  LaunchStatus group_start();
  LaunchStatus group_end();
  LaunchStatus send(int rank, int peer, const void* buf, std::size_t bytes);
  LaunchStatus recv(int rank, int peer, void* buf, std::size_t bytes);
  // Events that fork rank r's stream from the launch's stream and join it
  // back (cudaEvent_t; fork on the device current at create(), join[r] on
  // device r).
  void* fork_event() const { return fork_; }
  void* join_event(int r) const { return join_[std::size_t(r)]; }
  // The last NCCL failure ("ncclSend: unhandled cuda error ..."), empty if
  // none since clear_error() (each launch starts with it).
  const std::string& error() const { return error_; }
  void clear_error() { error_.clear(); }

  // Host state between the phases: counts[r][i] as the dispatch copied them
  // back (the counts layout: kernels/ep/a2a.cuh's header comment), valid
  // once a dispatch has run.
  std::int32_t* host_counts(int r) { return pinned_ + std::size_t(r) * kCountsPerRank; }
  static constexpr int kCountsPerRank = 4 * kMaxRanks;
  bool dispatched = false;

 private:
  Comm() = default;
  LaunchStatus fail(const char* what, int result);

  int ranks_ = 0;
  std::array<Stream, kMaxRanks> streams_{};
  std::array<void*, kMaxRanks> comms_{};  // ncclComm_t
  std::int32_t* pinned_ = nullptr;        // host counts, page-locked
  void* fork_ = nullptr;                  // cudaEvent_t
  std::array<void*, kMaxRanks> join_{};
  std::array<unsigned*, kMaxRanks> signals_{};  // kSignals words on each rank's GPU
  std::string error_;
  std::string nccl_unavailable_;
  bool peers_ = false;
};

}  // namespace moekit::ep
