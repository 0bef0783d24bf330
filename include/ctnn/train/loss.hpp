#pragma once
// Softmax cross-entropy on the host, from the logits (the Softmax layer's input, activation L-1 of a
// HostNetwork). Per sample: loss = logsumexp(z) − z_label, computed stably in double. The gradient
// with respect to the logits is the fused (softmax(z) − onehot(label)) / batch, i.e. ŷ − y averaged
// over the batch, which is why training back-propagates from below the Softmax layer.
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace ctnn {

struct CrossEntropy {
  double loss = 0;          // mean over the batch
  std::size_t correct = 0;  // samples whose argmax equals the label
};

// Index of the largest of v[0..n); ties go to the lowest index.
template <class T>
int argmax(const T* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

// General form, class count at run time. logits: [batch][classes]; labels: [batch], each in
// 0..classes-1. Writes dlogits ([batch][classes]) unless it is null.
template <class T, class Label>
CrossEntropy softmax_cross_entropy(const T* logits, const Label* labels, int batch, int classes,
                                   T* dlogits = nullptr) {
  if (batch < 1 || classes < 1)
    throw std::invalid_argument("ctnn: softmax_cross_entropy needs batch >= 1 and classes >= 1, got " +
                                std::to_string(batch) + " and " + std::to_string(classes));
  CrossEntropy r;
  double total = 0;
  for (int n = 0; n < batch; ++n) {
    const T* z = logits + std::size_t(n) * classes;
    const long long label = static_cast<long long>(labels[n]);
    if (label < 0 || label >= classes)
      throw std::out_of_range("ctnn: label " + std::to_string(label) + " of sample " +
                              std::to_string(n) + " is outside 0.." + std::to_string(classes - 1));
    const int top = argmax(z, classes);
    const double zmax = double(z[top]);
    double sum = 0;
    for (int i = 0; i < classes; ++i) sum += std::exp(double(z[i]) - zmax);
    total += zmax + std::log(sum) - double(z[label]);
    r.correct += top == label ? 1 : 0;
    if (dlogits) {
      T* d = dlogits + std::size_t(n) * classes;
      for (int i = 0; i < classes; ++i)
        d[i] = T((std::exp(double(z[i]) - zmax) / sum - (i == label ? 1.0 : 0.0)) / batch);
    }
  }
  r.loss = total / batch;
  return r;
}

// The form the trainers use: N classes fixed by the network's output shape.
template <int N, class T, class Label>
CrossEntropy softmax_cross_entropy(const T* logits, const Label* labels, int batch,
                                   T* dlogits = nullptr) {
  static_assert(N >= 1, "ctnn: cross-entropy needs at least one class");
  return softmax_cross_entropy(logits, labels, batch, N, dlogits);
}

}  // namespace ctnn
