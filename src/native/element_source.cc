#include "native/element_source.h"

#include <algorithm>
#include <cstring>

namespace kc::native {

int64_t TensorView::ElementCount() const {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  return count;
}

bool TensorView::IsCompact() const {
  if (strides.empty()) return true;
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    text += (d ? ", " : "") + std::to_string(shape[d]);
  }
  return text + "]";
}

namespace {

// Copies `count` elements of kSize bytes, `stride` elements apart, to consecutive places.
template <size_t kSize>
void CopyRun(const std::byte* from, int64_t stride, int64_t count, std::byte* to) {
  for (int64_t k = 0; k < count; ++k) {
    std::memcpy(to + k * static_cast<int64_t>(kSize),
                from + k * stride * static_cast<int64_t>(kSize), kSize);
  }
}

void CopyRun(size_t size, const std::byte* from, int64_t stride, int64_t count, std::byte* to) {
  switch (size) {
    case 1:
      return CopyRun<1>(from, stride, count, to);
    case 2:
      return CopyRun<2>(from, stride, count, to);
    case 4:
      return CopyRun<4>(from, stride, count, to);
    default:
      return CopyRun<8>(from, stride, count, to);
  }
}

}  // namespace

StatusOr<const std::byte*> HostElementSource::Read(int64_t first, int64_t count,
                                                   std::byte* staging) {
  const size_t size = DTypeSize(view_.dtype);
  const int64_t element = static_cast<int64_t>(size);
  if (view_.IsCompact()) return view_.data + first * element;

  // An odometer over the multi-index of element `first`, moving the offset along with it; the
  // innermost dimension is copied a run at a time.
  const std::vector<int64_t>& shape = view_.shape;
  const std::vector<int64_t>& strides = view_.strides;
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  std::vector<int64_t> index(shape.size());
  int64_t offset = 0;
  for (int64_t flat = first, d = last; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
    offset += index[d] * strides[d];
  }
  if (last < 0) {  // zero-dimensional: the one element
    std::memcpy(staging, view_.data, size);
    return static_cast<const std::byte*>(staging);
  }
  for (int64_t k = 0; k < count;) {
    int64_t run = std::min(count - k, shape[last] - index[last]);
    CopyRun(size, view_.data + offset * element, strides[last], run, staging + k * element);
    k += run;
    offset += run * strides[last];
    index[last] += run;
    for (int64_t d = last; d >= 0 && index[d] == shape[d]; --d) {  // carry
      offset -= strides[d] * shape[d];
      index[d] = 0;
      if (d > 0) {
        offset += strides[d - 1];
        ++index[d - 1];
      }
    }
  }
  return static_cast<const std::byte*>(staging);
}

}  // namespace kc::native
