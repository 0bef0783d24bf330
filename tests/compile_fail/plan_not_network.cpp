// A BufferPlan of a Seq rather than of a Network.
// expect: ctnn: BufferPlan takes a Network<Seq<...>, Input<...>>
#include <ctnn/ctnn.hpp>
#include <ctnn/network/plan.hpp>

using Layers = ctnn::Seq<ctnn::Dense<10>>;
#ifdef CTNN_FAIL
using Plan = ctnn::BufferPlan<Layers>;
#else
using Plan = ctnn::BufferPlan<ctnn::Network<Layers, ctnn::Input<784>>>;
#endif
static_assert(sizeof(Plan) > 0);  // instantiates the plan
