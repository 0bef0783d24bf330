// ctnn's optimizers, losses and schedules against numbers PyTorch computed (tests/host/torch_reference.py
// wrote torch_reference.inc with torch on the CPU in float32, from the same float32 inputs and
// hyperparameters): torch.optim.SGD / Adam / AdamW over five steps with a changing learning rate and
// zero padding, torch.nn.CrossEntropyLoss (label smoothing, probability targets) and MSELoss values and
// gradients, and the learning rates of torch.optim.lr_scheduler's CosineAnnealingLR, StepLR, LambdaLR
// (inverse time), OneCycleLR and a LinearLR warm-up chained by SequentialLR.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "ctnn/train/adam.hpp"
#include "ctnn/train/mse.hpp"
#include "ctnn/train/schedule.hpp"
#include "ctnn/train/sgd.hpp"
#include "ctnn/train/softmax_cross_entropy.hpp"
#include "torch_reference.inc"

using namespace ctnn;
namespace tr = torch_reference;

namespace {

// Float results that torch and ctnn compute with the same operations in the same order; they differ
// in the last bit where torch's CPU vector code fuses a multiply-add (a + α·b as one fmadd), which
// shows as an absolute difference of an ulp of the operands where the result cancels (measured with
// torch 2.11: parameters within 3.4e-8 of torch's, about half of them bitwise equal; momentum
// buffers bitwise equal; Adam's moments within 6e-7 relative).
void check_close(const float* got, const float* want, std::size_t count, double rel, double abs) {
  for (std::size_t i = 0; i < count; ++i) {
    INFO("element " << i);
    CHECK(double(got[i]) == Approx(double(want[i])).epsilon(rel).margin(abs));
  }
}

template <class Opt>
void check_optimizer(const typename Opt::Options& o, const float (&params)[tr::n],
                     const float (&state)[Opt::state_slots][tr::n]) {
  std::vector<float> p(tr::p0, tr::p0 + tr::n), s(Opt::state_slots * tr::n, 0.f);
  for (int k = 0; k < tr::steps; ++k) {
    const auto h = Opt::hyper(o, tr::lrs[k], k + 1);
    optimizer_step<Opt>(p.data(), tr::grads[k], s.data(), tr::n, h.data());
  }
  check_close(p.data(), params, tr::n, 1e-6, 1e-7);  // parameters are O(1)
  for (std::size_t k = 0; k < Opt::state_slots; ++k) check_close(s.data() + k * tr::n, state[k], tr::n, 2e-6, 1e-9);
  for (int i : {4, 5}) CHECK(p[std::size_t(i)] == 0.f);  // padding
}

template <class Loss>
void check_loss(const typename Loss::Options& o, const std::int32_t* labels, const float* targets, float mean,
                const float (&per_sample)[tr::batch], const float (&grad)[tr::batch * tr::width]) {
  std::vector<float> g(tr::batch * tr::width, -777.f), loss(tr::batch, -777.f);
  std::vector<std::int32_t> correct(tr::batch, -7);
  Loss::host(o, tr::logits, labels, targets, tr::batch, tr::width, g.data(), loss.data(), correct.data(), nullptr);
  check_close(loss.data(), per_sample, tr::batch, 1e-6, 1e-9);
  double sum = 0;
  for (float l : loss) sum += l;
  CHECK(sum / tr::batch == Approx(double(mean)).epsilon(1e-6));
  check_close(g.data(), grad, g.size(), 1e-5, 1e-8);  // (p − q)/batch cancels
}

void check_schedule(const Schedule& s, const float (&want)[tr::schedule_steps]) {
  for (int k = 0; k < tr::schedule_steps; ++k) {
    INFO("step " << k);
    CHECK(double(lr_at(s, 0.1f, k, 10, 3)) == Approx(double(want[k])).epsilon(1e-6).margin(1e-12));
  }
}

}  // namespace

TEST_CASE("torch reference: torch.optim.SGD, Adam and AdamW", "[optimizer][torch]") {
  INFO("reference numbers from torch " << tr::torch_version);
  SECTION("SGD momentum 0.9") { check_optimizer<Sgd>({0.9f, false, 0.f}, tr::sgd_momentum_params, tr::sgd_momentum_state); }
  SECTION("SGD Nesterov 0.8, weight decay 0.01") {
    check_optimizer<Sgd>({0.8f, true, 0.01f}, tr::sgd_nesterov_wd_params, tr::sgd_nesterov_wd_state);
  }
  SECTION("Adam") { check_optimizer<Adam>({0.9f, 0.999f, 1e-8f, 0.f}, tr::adam_params, tr::adam_state); }
  SECTION("Adam betas (0.8, 0.99), eps 1e-6, weight decay 0.1") {
    check_optimizer<Adam>({0.8f, 0.99f, 1e-6f, 0.1f}, tr::adam_wd_params, tr::adam_wd_state);
  }
  SECTION("AdamW") { check_optimizer<AdamW>({0.9f, 0.999f, 1e-8f, 0.01f}, tr::adamw_params, tr::adamw_state); }
  SECTION("AdamW beta1 0.3, weight decay 0.5") {
    check_optimizer<AdamW>({0.3f, 0.95f, 1e-8f, 0.5f}, tr::adamw_lerp_params, tr::adamw_lerp_state);
  }
}

TEST_CASE("torch reference: CrossEntropyLoss and MSELoss", "[loss][torch]") {
  INFO("reference numbers from torch " << tr::torch_version);
  check_loss<SoftmaxCrossEntropy>({0.f}, tr::labels, nullptr, tr::ce_loss, tr::ce_per_sample, tr::ce_grad);
  check_loss<SoftmaxCrossEntropy>({0.1f}, tr::labels, nullptr, tr::ce_smooth_loss, tr::ce_smooth_per_sample,
                                  tr::ce_smooth_grad);
  check_loss<SoftmaxCrossEntropy>({0.2f}, nullptr, tr::prob_targets, tr::ce_probs_smooth_loss,
                                  tr::ce_probs_smooth_per_sample, tr::ce_probs_smooth_grad);
  check_loss<Mse>({}, tr::labels, nullptr, tr::mse_labels_loss, tr::mse_labels_per_sample, tr::mse_labels_grad);
  check_loss<Mse>({}, nullptr, tr::value_targets, tr::mse_values_loss, tr::mse_values_per_sample, tr::mse_values_grad);
}

TEST_CASE("torch reference: lr_scheduler rates, stepped per batch", "[schedule][torch]") {
  INFO("reference numbers from torch " << tr::torch_version);
  check_schedule(LrSchedule::cosine.per_batch(), tr::cosine_lr);
  check_schedule(Schedule::cosine_to(0.1f).per_batch(), tr::cosine_min_lr);
  check_schedule(Schedule::step_decay(3, 0.5f).per_batch(), tr::step_decay_lr);
  check_schedule(Schedule::inverse_time(0.5f).per_batch(), tr::inverse_time_lr);
  check_schedule(Schedule::one_cycle(0.25f, 10.f, 100.f).per_batch(), tr::one_cycle_lr);
  check_schedule(LrSchedule::cosine.per_batch().with_warmup(4, 0.25f), tr::warmup_cosine_lr);
  check_schedule(Schedule::step_decay(4, 0.5f).per_batch().with_warmup(5, 0.2f), tr::warmup_step_lr);
}
