#include "profiler/device_embedding_bag.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "profiler/cuda_error.hpp"

#if PERFCAST_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "profiler/cuda_check.hpp"
#include "profiler/device_buffer.hpp"
#include "profiler/device_info.hpp"
#include "profiler/kernels/embedding_bag.hpp"
#endif

namespace perfcast::profiler {

#if PERFCAST_HAVE_CUDA

namespace {

template <typename T>
DeviceBuffer upload(std::span<const T> host) {
  return DeviceBuffer(host.data(), host.size_bytes());
}

void check_size(const char* what, std::size_t got, std::int64_t want) {
  if (static_cast<std::int64_t>(got) != want) {
    throw std::invalid_argument(std::string("DeviceEmbeddingBag: ") + what + " holds " + std::to_string(got) +
                                " elements, expected " + std::to_string(want));
  }
}

}  // namespace

struct DeviceEmbeddingBag::Impl {
  EmbeddingBagLayout layout;
  WeightPrecision precision = WeightPrecision::kFp32;
  int device = 0;
  DeviceBuffer tables;
  DeviceBuffer weights;
  DeviceBuffer state;

  /// Batch description with the device copies of indices and offsets.
  kernels::EmbeddingBagDeviceBatch batch(const DeviceBuffer& indices, std::int64_t num_indices,
                                         const DeviceBuffer& offsets, PoolingMode pooling) const {
    kernels::EmbeddingBagDeviceBatch b = kernels::make_device_batch(layout, precision, pooling, num_indices);
    b.tables = tables.as<const EmbeddingTableMeta>();
    b.indices = indices.as<const std::int64_t>();
    b.offsets = offsets.as<const std::int64_t>();
    return b;
  }
};

DeviceEmbeddingBag::DeviceEmbeddingBag(EmbeddingBagLayout layout, const HostEmbeddingWeights& weights,
                                       std::span<const float> rowwise_state, int device) {
  const int count = cuda_device_count();
  if (count == 0) throw NoCudaDeviceError("the CUDA runtime reports no device (no GPU or no driver)");
  if (device < 0 || device >= count) {
    throw std::out_of_range("DeviceEmbeddingBag: device " + std::to_string(device) + " does not exist");
  }
  check_size("weights", static_cast<std::size_t>(weights.size()), layout.total_weight_elements);
  if (!rowwise_state.empty()) check_size("rowwise_state", rowwise_state.size(), layout.total_rows);

  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->precision = weights.precision();
  PERFCAST_CUDA_CHECK(cudaSetDevice(device));
  impl->tables = upload(std::span<const EmbeddingTableMeta>(layout.tables));
  impl->weights = DeviceBuffer(weights.data(), weights.size_bytes());
  const auto state_bytes = static_cast<std::size_t>(layout.total_rows) * sizeof(float);
  if (rowwise_state.empty()) {
    impl->state = DeviceBuffer(state_bytes);
    PERFCAST_CUDA_CHECK(cudaMemset(impl->state.as<void>(), 0, state_bytes));
  } else {
    impl->state = upload(rowwise_state);
  }
  impl->layout = std::move(layout);
  impl_ = std::move(impl);
}

const EmbeddingBagLayout& DeviceEmbeddingBag::layout() const { return impl_->layout; }

std::vector<float> DeviceEmbeddingBag::forward(std::span<const std::int64_t> indices,
                                               std::span<const std::int64_t> offsets, PoolingMode pooling) {
  validate_embedding_bag_batch(impl_->layout, indices, offsets);
  PERFCAST_CUDA_CHECK(cudaSetDevice(impl_->device));
  const DeviceBuffer d_indices = upload(indices);
  const DeviceBuffer d_offsets = upload(offsets);
  std::vector<float> output(static_cast<std::size_t>(impl_->layout.batch_size * impl_->layout.total_dim));
  const DeviceBuffer d_output(output.size() * sizeof(float));
  kernels::launch_embedding_bag_forward(
      impl_->batch(d_indices, static_cast<std::int64_t>(indices.size()), d_offsets, pooling),
      impl_->weights.as<const void>(), d_output.as<float>(), nullptr);
  PERFCAST_CUDA_CHECK(cudaMemcpy(output.data(), d_output.as<const void>(), d_output.bytes(), cudaMemcpyDeviceToHost));
  return output;
}

void DeviceEmbeddingBag::backward_update(std::span<const std::int64_t> indices,
                                         std::span<const std::int64_t> offsets, PoolingMode pooling,
                                         std::span<const float> grad_output, const OptimizerConfig& optimizer) {
  validate_embedding_bag_batch(impl_->layout, indices, offsets);
  check_size("grad_output", grad_output.size(), impl_->layout.batch_size * impl_->layout.total_dim);
  PERFCAST_CUDA_CHECK(cudaSetDevice(impl_->device));
  const auto num_indices = static_cast<std::int64_t>(indices.size());
  const DeviceBuffer d_indices = upload(indices);
  const DeviceBuffer d_offsets = upload(offsets);
  const DeviceBuffer d_grad = upload(grad_output);
  const DeviceBuffer workspace(kernels::embedding_bag_backward_workspace_bytes(num_indices));
  kernels::launch_embedding_bag_backward_update(impl_->batch(d_indices, num_indices, d_offsets, pooling),
                                                impl_->weights.as<void>(), impl_->state.as<float>(),
                                                d_grad.as<const float>(), optimizer, workspace.as<void>(),
                                                workspace.bytes(), nullptr);
  PERFCAST_CUDA_CHECK(cudaDeviceSynchronize());
}

HostEmbeddingWeights DeviceEmbeddingBag::download_weights() const {
  PERFCAST_CUDA_CHECK(cudaSetDevice(impl_->device));
  HostEmbeddingWeights host(impl_->precision, impl_->layout.total_weight_elements);
  PERFCAST_CUDA_CHECK(
      cudaMemcpy(host.data(), impl_->weights.as<const void>(), host.size_bytes(), cudaMemcpyDeviceToHost));
  return host;
}

std::vector<float> DeviceEmbeddingBag::download_rowwise_state() const {
  PERFCAST_CUDA_CHECK(cudaSetDevice(impl_->device));
  std::vector<float> host(static_cast<std::size_t>(impl_->layout.total_rows));
  PERFCAST_CUDA_CHECK(
      cudaMemcpy(host.data(), impl_->state.as<const void>(), host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

#else  // !PERFCAST_HAVE_CUDA

struct DeviceEmbeddingBag::Impl {
  EmbeddingBagLayout layout;
};

namespace {
[[noreturn]] void built_without_cuda() {
  throw NoCudaDeviceError("perfcast was built without CUDA (PERFCAST_ENABLE_CUDA=OFF or no nvcc)");
}
}  // namespace

DeviceEmbeddingBag::DeviceEmbeddingBag(EmbeddingBagLayout /*layout*/, const HostEmbeddingWeights& /*weights*/,
                                       std::span<const float> /*rowwise_state*/, int /*device*/) {
  built_without_cuda();
}
const EmbeddingBagLayout& DeviceEmbeddingBag::layout() const { return impl_->layout; }
std::vector<float> DeviceEmbeddingBag::forward(std::span<const std::int64_t>, std::span<const std::int64_t>,
                                               PoolingMode) {
  built_without_cuda();
}
void DeviceEmbeddingBag::backward_update(std::span<const std::int64_t>, std::span<const std::int64_t>, PoolingMode,
                                         std::span<const float>, const OptimizerConfig&) {
  built_without_cuda();
}
HostEmbeddingWeights DeviceEmbeddingBag::download_weights() const { built_without_cuda(); }
std::vector<float> DeviceEmbeddingBag::download_rowwise_state() const { built_without_cuda(); }

#endif  // PERFCAST_HAVE_CUDA

DeviceEmbeddingBag::~DeviceEmbeddingBag() = default;
DeviceEmbeddingBag::DeviceEmbeddingBag(DeviceEmbeddingBag&&) noexcept = default;
DeviceEmbeddingBag& DeviceEmbeddingBag::operator=(DeviceEmbeddingBag&&) noexcept = default;

}  // namespace perfcast::profiler
