#pragma once
// A captured CUDA graph (CudaGraph): how a whole training step becomes one launch. The trainer's
// captured step finds its per-step values through a step cursor in device memory, so one capture
// walks through every epoch.
#include <cstddef>
#include <vector>

#include "cuda_check.hpp"

namespace ctnn {

// A captured CUDA graph and its executable instance (the graph is kept for node_counts).
class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph() { reset(); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  explicit operator bool() const { return exec_ != nullptr; }

  // Captures what body() enqueues on `stream` and instantiates it. If body throws, the capture is
  // ended and discarded and the exception propagates.
  template <class Body>
  void capture(cudaStream_t stream, Body&& body) {
    reset();
    CTNN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      body();
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(stream, &broken);
      if (broken) cudaGraphDestroy(broken);
      cudaGetLastError();  // an invalidated capture leaves an error behind
      throw;
    }
    CTNN_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    // Each kernel node keeps the priority of the stream it was captured from (cuda_network.hpp).
    CTNN_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, cudaGraphInstantiateFlagUseNodePriority));
  }

  void launch(cudaStream_t stream) { CTNN_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

  // What the captured graph holds: kernel launches, copies, anything else (memsets, ...).
  struct NodeCounts {
    std::size_t kernels = 0, copies = 0, other = 0;
  };
  NodeCounts node_counts() const {
    NodeCounts c;
    if (!graph_) return c;
    std::size_t n = 0;
    CTNN_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    CTNN_CUDA_CHECK(cudaGraphGetNodes(graph_, nodes.data(), &n));
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type{};
      CTNN_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      (type == cudaGraphNodeTypeKernel ? c.kernels : type == cudaGraphNodeTypeMemcpy ? c.copies : c.other) += 1;
    }
    return c;
  }

  void reset() noexcept {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};


}  // namespace ctnn
