#pragma once
// Each layer's work (layer_work) for a whole model or a run of its layers, a run of same-shape layers sharing
// one LayerWork: a model's blocks come in long runs of one shape, and the planner keeps a model's works for
// thousands of configurations at once (DeepSeek-V3 at 32K tokens: 64 LayerWorks of about 20 allocations each
// per table, copied per layer, were a fifth of the search and 1 GB of its memory).
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "core/layer_work.hpp"

namespace pw {

class LayerWorks {
 public:
  LayerWorks() = default;
  // Each layer with a work of its own (callers that make works one by one): implicit, so that such a vector
  // goes wherever layer works are asked for.
  LayerWorks(std::vector<LayerWork> each) : distinct_(std::move(each)) {
    for (size_t i = 0; i < distinct_.size(); ++i) of_layer_.push_back(static_cast<uint32_t>(i));
  }

  // The next layer, with its own work, or with the work of the layer before it (the same shape; not the first).
  void push_back(LayerWork work) {
    of_layer_.push_back(static_cast<uint32_t>(distinct_.size()));
    distinct_.push_back(std::move(work));
  }
  void repeat_last() { of_layer_.push_back(of_layer_.back()); }
  // Layers [begin, end) of `from`, sharing works as they share them there.
  void append(const LayerWorks& from, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      if (i > begin && from.of_layer_[i] == from.of_layer_[i - 1]) repeat_last();
      else push_back(from[i]);
    }
  }
  void reserve(size_t layers) { of_layer_.reserve(layers); }

  size_t size() const { return of_layer_.size(); }
  bool empty() const { return of_layer_.empty(); }
  size_t distinct() const { return distinct_.size(); }  // LayerWorks held
  const LayerWork& operator[](size_t i) const { return distinct_[of_layer_[i]]; }
  const LayerWork& front() const { return (*this)[0]; }
  const LayerWork& back() const { return (*this)[size() - 1]; }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = LayerWork;
    using difference_type = std::ptrdiff_t;
    using pointer = const LayerWork*;
    using reference = const LayerWork&;
    const_iterator(const LayerWorks* works, size_t i) : works_(works), i_(i) {}
    reference operator*() const { return (*works_)[i_]; }
    pointer operator->() const { return &(*works_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++i_;
      return before;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    const LayerWorks* works_;
    size_t i_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

 private:
  std::vector<LayerWork> distinct_;
  std::vector<uint32_t> of_layer_;  // per layer, its work's index in distinct_
};

// layer_work of layers [first, last] under one workload, appended to `out`: a run of same-shape layers is worked
// once and shared (the planner works every layer of every candidate's workload).
void append_layer_works(const Model& model, int first, int last, const Workload& w, LayerWorks& out);

}  // namespace pw
