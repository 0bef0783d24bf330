#pragma once
// A captured CUDA graph (CudaGraph) and the node a capture just recorded (last_captured_node): how a
// whole training step becomes one launch. A captured step whose memcpy nodes are re-pointed before
// each launch (set_copy) can walk through an epoch without being captured again.
#include <cstddef>
#include <string>
#include <vector>

#include "cuda_check.hpp"

namespace ctnn {


// The node that the next operation captured on `stream` would depend on; right after a
// cudaMemcpyAsync on a capturing stream (whose work is a chain), that copy's node.
inline cudaGraphNode_t last_captured_node(cudaStream_t stream) {
  cudaStreamCaptureStatus status{};
  const cudaGraphNode_t* nodes = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  std::size_t count = 0;
  CTNN_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &nodes, &edges, &count));
  if (status != cudaStreamCaptureStatusActive || count != 1)
    throw cuda_error("ctnn: expected the stream to be capturing a chain of operations (capture status " +
                     std::to_string(int(status)) + ", " + std::to_string(count) + " open dependencies)");
  return nodes[0];
}

// A captured CUDA graph and its executable instance. The graph is kept alive because node handles
// used to update the instance must belong to it.
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
    CTNN_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }

  // Re-points memcpy node `node` (a 1-D device-to-device copy of the captured graph) for the next
  // launches.
  void set_copy(cudaGraphNode_t node, void* dst, const void* src, std::size_t bytes) {
    CTNN_CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(exec_, node, dst, src, bytes, cudaMemcpyDeviceToDevice));
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
