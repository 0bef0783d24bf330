#pragma once
// Learning-rate schedules: a value type naming the shape (constant, cosine, step decay, inverse time,
// one-cycle), whether it steps per epoch or per batch, and an optional linear warm-up, and one pure
// function lr_at() that gives the rate of any step. Nothing is stateful, so a resumed run gets the
// same rates as a straight one.
//
//   opt.schedule = ctnn::LrSchedule::cosine;                               // per epoch, as before
//   opt.schedule = ctnn::Schedule::step_decay(10, 0.5f).with_warmup(2);    // 2 warm-up epochs
//   opt.schedule = ctnn::Schedule::one_cycle().per_batch();                // torch's OneCycleLR
//
// Units: with per-epoch stepping (the default) t is the 0-based epoch, step / steps_per_epoch, and
// the run is T = total_epochs long; per batch, t is the 0-based global step and T = total_epochs ·
// steps_per_epoch. A warm-up of W units runs first, lr·(s + (1 − s)·t/W) for t < W (torch's
// LinearLR(start_factor=s, total_iters=W)); then the shape runs on t' = t − W over T' = max(T − W, 1)
// units, as torch's SequentialLR([LinearLR, main], milestones=[W]) does. With base rate lr:
//   constant      lr
//   cosine        η + (lr − η)·(1 + cos(π·t'/T'))/2, η = min_factor·lr   (CosineAnnealingLR, T_max=T';
//                 t' is held at T' past the end)
//   step decay    lr·γ^⌊t'/step_size⌋                                      (StepLR)
//   inverse time  lr / (1 + k·t')
//   one-cycle     OneCycleLR(max_lr=lr, total_steps=T', pct_start, div_factor, final_div_factor,
//                 anneal_strategy='cos', three_phase=False) without its momentum cycling; t' is held at
//                 T' − 1 past the end
// docs/optimizers.md shows each beside its torch.optim.lr_scheduler spelling.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace ctnn {

struct Schedule {
  enum class Kind : std::uint8_t { constant, cosine, step_decay, inverse_time, one_cycle };
  enum class Unit : std::uint8_t { epoch, batch };

  Kind kind = Kind::constant;
  Unit unit = Unit::epoch;
  float min_factor = 0.f;  // cosine: the last rate as a fraction of the base rate
  int step_size = 1;       // step decay: units between decays
  float gamma = 0.1f;      // step decay: the factor per decay
  float k = 0.f;           // inverse time
  float pct_start = 0.3f, div_factor = 25.f, final_div_factor = 1e4f;  // one-cycle, torch's defaults
  std::int64_t warmup = 0;                                             // warm-up units (0: none)
  float warmup_start = 0.f;                                            // s, the first warm-up factor

  // The two schedules that used to be an enum, so that LrSchedule::constant / ::cosine still read.
  static const Schedule constant;  // lr throughout
  static const Schedule cosine;    // per epoch: epoch e of E (1-based) gets lr·(1 + cos(π·(e−1)/E))/2

  static constexpr Schedule cosine_to(float min_factor) {
    Schedule s{};
    s.kind = Kind::cosine, s.min_factor = min_factor;
    return s;
  }
  static constexpr Schedule step_decay(int step_size, float gamma = 0.1f) {
    Schedule s{};
    s.kind = Kind::step_decay, s.step_size = step_size, s.gamma = gamma;
    return s;
  }
  static constexpr Schedule inverse_time(float k) {
    Schedule s{};
    s.kind = Kind::inverse_time, s.k = k;
    return s;
  }
  static constexpr Schedule one_cycle(float pct_start = 0.3f, float div_factor = 25.f,
                                      float final_div_factor = 1e4f) {
    Schedule s{};
    s.kind = Kind::one_cycle, s.pct_start = pct_start, s.div_factor = div_factor;
    s.final_div_factor = final_div_factor;
    return s;
  }

  constexpr Schedule per_batch() const {
    Schedule s = *this;
    s.unit = Unit::batch;
    return s;
  }
  constexpr Schedule per_epoch() const {
    Schedule s = *this;
    s.unit = Unit::epoch;
    return s;
  }
  // A linear warm-up over `length` units from start_factor·lr; without start_factor it starts at
  // lr/(length + 1), so that no step has a zero rate: factors 1/(W+1), 2/(W+1), ..., then 1.
  constexpr Schedule with_warmup(std::int64_t length) const {
    return with_warmup(length, length > 0 ? 1.f / float(length + 1) : 1.f);
  }
  constexpr Schedule with_warmup(std::int64_t length, float start_factor) const {
    Schedule s = *this;
    s.warmup = length, s.warmup_start = start_factor;
    return s;
  }

  friend constexpr bool operator==(const Schedule&, const Schedule&) = default;
};

inline constexpr Schedule Schedule::constant{};
inline constexpr Schedule Schedule::cosine = Schedule::cosine_to(0.f);

// The trainers' name for it.
using LrSchedule = Schedule;

// Throws std::invalid_argument("ctnn: ...") for a schedule whose numbers make no sense.
inline void validate(const Schedule& s) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("ctnn: learning-rate schedule: " + what);
  };
  require(s.warmup >= 0, "the warm-up length must not be negative, got " + std::to_string(s.warmup));
  require(s.warmup == 0 || (s.warmup_start >= 0 && s.warmup_start <= 1),
          "the warm-up start factor must be in [0, 1], got " + std::to_string(s.warmup_start));
  switch (s.kind) {
    case Schedule::Kind::constant: break;
    case Schedule::Kind::cosine:
      require(s.min_factor >= 0 && s.min_factor <= 1,
              "the cosine's min_factor must be in [0, 1], got " + std::to_string(s.min_factor));
      break;
    case Schedule::Kind::step_decay:
      require(s.step_size >= 1, "step decay needs step_size >= 1, got " + std::to_string(s.step_size));
      require(std::isfinite(s.gamma) && s.gamma > 0, "step decay needs a finite gamma > 0, got " +
                                                         std::to_string(s.gamma));
      break;
    case Schedule::Kind::inverse_time:
      require(std::isfinite(s.k) && s.k >= 0, "inverse time needs a finite k >= 0, got " + std::to_string(s.k));
      break;
    case Schedule::Kind::one_cycle:
      require(s.pct_start > 0 && s.pct_start < 1, "one-cycle needs pct_start in (0, 1), got " +
                                                      std::to_string(s.pct_start));
      require(std::isfinite(s.div_factor) && s.div_factor > 0, "one-cycle needs a finite div_factor > 0");
      require(std::isfinite(s.final_div_factor) && s.final_div_factor > 0,
              "one-cycle needs a finite final_div_factor > 0");
      break;
    default: require(false, "unknown kind " + std::to_string(int(s.kind)));
  }
}

// The learning rate of global step `step` (0-based batch index over the whole run) under schedule s
// with base rate base_lr, for a run of total_epochs epochs of steps_per_epoch batches (see the top).
inline float lr_at(const Schedule& s, float base_lr, std::int64_t step, std::int64_t steps_per_epoch,
                   int total_epochs) {
  validate(s);
  if (step < 0 || steps_per_epoch < 1 || total_epochs < 0)
    throw std::invalid_argument("ctnn: lr_at needs step >= 0, steps_per_epoch >= 1 and total_epochs >= 0, got " +
                                std::to_string(step) + ", " + std::to_string(steps_per_epoch) + ", " +
                                std::to_string(total_epochs));
  const bool per_batch = s.unit == Schedule::Unit::batch;
  const std::int64_t t = per_batch ? step : step / steps_per_epoch;
  const std::int64_t T = per_batch ? steps_per_epoch * total_epochs : total_epochs;
  const double lr = base_lr, pi = 3.141592653589793;
  if (t < s.warmup) {
    const double f0 = s.warmup_start;
    return float(lr * (f0 + (1 - f0) * double(t) / double(s.warmup)));
  }
  const std::int64_t U = T - s.warmup > 1 ? T - s.warmup : 1;  // the main shape's length
  const std::int64_t u = t - s.warmup;                           // and its position
  switch (s.kind) {
    case Schedule::Kind::constant: return base_lr;
    case Schedule::Kind::cosine: {
      const double eta = double(s.min_factor) * lr, at = double(u < U ? u : U);
      return float(eta + (lr - eta) * (1 + std::cos(pi * at / double(U))) / 2);
    }
    case Schedule::Kind::step_decay: return float(lr * std::pow(double(s.gamma), double(u / s.step_size)));
    case Schedule::Kind::inverse_time: return float(lr / (1 + double(s.k) * double(u)));
    case Schedule::Kind::one_cycle: {
      // torch.optim.lr_scheduler.OneCycleLR.get_lr, two phases, cosine annealing.
      const double initial = lr / double(s.div_factor), last = initial / double(s.final_div_factor);
      const double end1 = double(s.pct_start) * double(U) - 1, end2 = double(U) - 1;
      const double at = double(u < U - 1 ? u : U - 1);
      auto anneal = [pi](double from, double to, double pct) {
        return to + (from - to) / 2.0 * (std::cos(pi * pct) + 1);
      };
      if (at <= end1) return float(anneal(initial, lr, end1 > 0 ? at / end1 : 1.0));
      return float(anneal(lr, last, end2 > end1 ? (at - end1) / (end2 - end1) : 1.0));
    }
  }
  return base_lr;
}

}  // namespace ctnn
