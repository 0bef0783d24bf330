// Learning-rate schedules (train/schedule.hpp): each shape at chosen steps against its formula written
// out here (torch.optim.lr_scheduler's closed forms), per epoch and per batch, with and without a
// linear warm-up; the old LrSchedule::cosine over epochs; the option checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "ctnn/train/schedule.hpp"

using namespace ctnn;
using Catch::Contains;

namespace {
const double pi = 3.141592653589793;
constexpr float lr = 0.1f;
const double base = double(lr);
}  // namespace

static_assert(LrSchedule::constant == Schedule{});
static_assert(LrSchedule::cosine.kind == Schedule::Kind::cosine && LrSchedule::cosine.unit == Schedule::Unit::epoch);
static_assert(!(LrSchedule::cosine == LrSchedule::constant));
static_assert(Schedule::one_cycle().per_batch().with_warmup(3).unit == Schedule::Unit::batch);

TEST_CASE("Schedule: constant and the cosine over epochs that LrSchedule::cosine always was", "[schedule]") {
  for (std::int64_t s : {0, 5, 99}) CHECK(lr_at(LrSchedule::constant, lr, s, 10, 10) == lr);
  // Epoch e of E (1-based), at every batch of it: lr·(1 + cos(π·(e−1)/E))/2.
  const int E = 5;
  const std::int64_t steps = 7;
  for (int e = 1; e <= E; ++e)
    for (std::int64_t b : {0, 3, 6}) {
      INFO("epoch " << e << " batch " << b);
      CHECK(lr_at(LrSchedule::cosine, lr, (e - 1) * steps + b, steps, E) ==
            Approx(base * (1 + std::cos(pi * (e - 1) / E)) / 2));
    }
  CHECK(lr_at(LrSchedule::cosine, lr, 0, 7, 1) == lr);  // a one-epoch run keeps the base rate
}

TEST_CASE("Schedule: cosine per batch, and down to a floor", "[schedule]") {
  const std::int64_t steps = 10;
  const int E = 3;  // T = 30 steps
  for (std::int64_t s : {0, 1, 14, 29}) {
    INFO("step " << s);
    CHECK(lr_at(LrSchedule::cosine.per_batch(), lr, s, steps, E) == Approx(base * (1 + std::cos(pi * s / 30.0)) / 2));
    CHECK(lr_at(Schedule::cosine_to(0.1f).per_batch(), lr, s, steps, E) ==
          Approx(0.01 + (base - 0.01) * (1 + std::cos(pi * s / 30.0)) / 2).epsilon(1e-6));
  }
  CHECK(lr_at(LrSchedule::cosine.per_batch(), lr, 45, steps, E) == Approx(0).margin(1e-12));  // held past the end
}

TEST_CASE("Schedule: step decay (StepLR) per epoch and per batch", "[schedule]") {
  const Schedule s = Schedule::step_decay(3, 0.5f);
  for (int e = 0; e < 10; ++e) {
    INFO("epoch " << e);
    CHECK(lr_at(s, lr, std::int64_t(e) * 4 + 2, 4, 10) == Approx(base * std::pow(0.5, e / 3)));
  }
  for (std::int64_t b : {0, 2, 3, 7, 11}) CHECK(lr_at(s.per_batch(), lr, b, 4, 10) == Approx(base * std::pow(0.5, b / 3)));
}

TEST_CASE("Schedule: inverse time lr/(1 + k·t), t in epochs or in steps", "[schedule]") {
  const Schedule s = Schedule::inverse_time(0.5f);
  for (std::int64_t step : {0, 5, 9, 10, 37}) {
    INFO("step " << step);
    CHECK(lr_at(s, lr, step, 10, 5) == Approx(base / (1 + 0.5 * double(step / 10))));
    CHECK(lr_at(s.per_batch(), lr, step, 10, 5) == Approx(base / (1 + 0.5 * double(step))));
  }
}

TEST_CASE("Schedule: one-cycle as torch's OneCycleLR (cosine, two phases)", "[schedule]") {
  // total_steps 100, pct_start 0.25: phase one ends at step 24 (0.25·100 − 1), phase two at 99.
  const std::int64_t steps = 20;
  const int E = 5;
  const Schedule s = Schedule::one_cycle(0.25f, 10.f, 100.f).per_batch();
  const double initial = base / 10, last = initial / 100;
  auto anneal = [](double from, double to, double pct) { return to + (from - to) / 2 * (std::cos(pi * pct) + 1); };
  const double end1 = double(0.25f) * 100 - 1;
  CHECK(lr_at(s, lr, 0, steps, E) == Approx(initial));
  CHECK(lr_at(s, lr, 10, steps, E) == Approx(anneal(initial, base, 10 / end1)));
  CHECK(lr_at(s, lr, 24, steps, E) == Approx(base));
  CHECK(lr_at(s, lr, 60, steps, E) == Approx(anneal(base, last, (60 - end1) / (99 - end1))));
  CHECK(lr_at(s, lr, 99, steps, E) == Approx(last));
  CHECK(lr_at(s, lr, 140, steps, E) == Approx(last));  // held past the end
  // Per epoch: total_steps = epochs.
  const Schedule se = Schedule::one_cycle(0.4f);
  const double e_initial = base / 25, e_end1 = double(0.4f) * 5 - 1;
  CHECK(lr_at(se, lr, 0, steps, E) == Approx(e_initial));
  CHECK(lr_at(se, lr, steps, steps, E) == Approx(anneal(e_initial, base, 1 / e_end1)));
  CHECK(lr_at(se, lr, 4 * steps + 3, steps, E) == Approx(e_initial / 1e4));
}

TEST_CASE("Schedule: linear warm-up, then the shape over the rest of the run", "[schedule]") {
  const std::int64_t steps = 10;
  const int E = 6;
  // Warm-up of 2 epochs from 0.25·lr, then cosine over the remaining 4 epochs.
  const Schedule s = LrSchedule::cosine.with_warmup(2, 0.25f);
  CHECK(lr_at(s, lr, 0, steps, E) == Approx(0.25 * base));
  CHECK(lr_at(s, lr, 15, steps, E) == Approx((0.25 + 0.75 * 1 / 2.0) * base));
  for (int e = 2; e < E; ++e)
    CHECK(lr_at(s, lr, e * steps, steps, E) == Approx(base * (1 + std::cos(pi * (e - 2) / 4.0)) / 2));
  // Default start: factors 1/(W+1), 2/(W+1), ... per batch, then the base rate.
  const Schedule w = LrSchedule::constant.with_warmup(4).per_batch();
  for (std::int64_t b = 0; b < 4; ++b) CHECK(lr_at(w, lr, b, steps, E) == Approx(base * double(b + 1) / 5));
  CHECK(lr_at(w, lr, 4, steps, E) == lr);
  // Step decay after a 3-step warm-up counts its steps from the end of the warm-up.
  const Schedule d = Schedule::step_decay(5, 0.1f).per_batch().with_warmup(3, 0.f);
  CHECK(lr_at(d, lr, 0, steps, E) == 0.f);
  CHECK(lr_at(d, lr, 7, steps, E) == Approx(base));
  CHECK(lr_at(d, lr, 8, steps, E) == Approx(base * 0.1));
  // Inverse time after warm-up.
  CHECK(lr_at(Schedule::inverse_time(1.f).with_warmup(1), lr, 3 * steps, steps, E) == Approx(base / 3));
}

TEST_CASE("Schedule: bad schedules are refused with a ctnn: message", "[schedule][errors]") {
  CHECK_THROWS_WITH(lr_at(Schedule::step_decay(0), lr, 0, 1, 1), Contains("ctnn: learning-rate schedule: step decay"));
  CHECK_THROWS_WITH(lr_at(Schedule::one_cycle(1.5f), lr, 0, 1, 1), Contains("pct_start"));
  CHECK_THROWS_WITH(lr_at(Schedule::inverse_time(-1.f), lr, 0, 1, 1), Contains("inverse time"));
  CHECK_THROWS_WITH(lr_at(LrSchedule::cosine.with_warmup(-2), lr, 0, 1, 1), Contains("warm-up length"));
  CHECK_THROWS_WITH(lr_at(LrSchedule::cosine.with_warmup(2, 2.f), lr, 0, 1, 1), Contains("warm-up start factor"));
  CHECK_THROWS_WITH(lr_at(LrSchedule::cosine, lr, 0, 0, 1), Contains("steps_per_epoch >= 1"));
  CHECK_THROWS_WITH(lr_at(LrSchedule::cosine, lr, -1, 1, 1), Contains("step >= 0"));
}
