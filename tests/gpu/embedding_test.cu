// The row gather against cpu::embedding: conversions are exact, so every element must match bitwise
// after rounding the reference to the output dtype; out-of-range ids give NaN rows.
#include "kernels/cuda/embedding.h"

#include <gtest/gtest.h>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"

namespace fuselm {
namespace {

using test::DeviceArray;

TEST(CudaEmbedding, MatchesCpuReferenceForEveryDtypePair) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(11);
  struct Shape {
    int64_t rows, dim, n;
  };
  for (const Shape& s : {Shape{32000, 128, 15}, Shape{512, 64, 1}, Shape{1000, 100, 33}, Shape{7, 4096, 9},
                         Shape{50, 7, 64}}) {
    for (DType table_dtype : {DType::F32, DType::F16, DType::BF16}) {
      for (DType out_dtype : {DType::F32, DType::F16, DType::BF16}) {
        SCOPED_TRACE(testing::Message() << "rows=" << s.rows << " dim=" << s.dim << " n=" << s.n << " table="
                                        << dtype_name(table_dtype) << " out=" << dtype_name(out_dtype));
        const test::HostTensor table = test::random_tensor(gen, s.rows * s.dim, table_dtype, -3.0f, 3.0f);
        std::vector<int32_t> ids(static_cast<size_t>(s.n));
        std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(s.rows - 1));
        for (auto& id : ids) id = pick(gen);
        DeviceArray d_table(table.bytes.size()), d_ids(ids.size() * 4), d_out(dtype_bytes(out_dtype, s.n * s.dim));
        d_table.upload(table.data(), table.bytes.size());
        d_ids.upload(ids.data(), ids.size() * 4);
        d_out.poison();
        ASSERT_STATUS_OK(embedding(d_table.get(), table_dtype, s.rows, s.dim, d_ids.get<int32_t>(), s.n, d_out.get(),
                                   out_dtype, nullptr));
        ASSERT_CUDA_OK(cudaDeviceSynchronize());
        std::vector<float> want(static_cast<size_t>(s.n * s.dim));
        cpu::embedding({table.data(), table_dtype, s.rows, s.dim}, ids.data(), s.n, want.data());
        EXPECT_TRUE(test::all_close(test::download_as_f32(d_out.get(), out_dtype, s.n * s.dim),
                                    test::rounded(want, out_dtype), 0.0f, 0.0f));
      }
    }
  }
}

TEST(CudaEmbedding, OutOfRangeIdsGiveNanRowsAndOthersAreUntouched) {
  FUSELM_REQUIRE_GPU();
  std::mt19937 gen(12);
  const int64_t rows = 10, dim = 64;
  const test::HostTensor table = test::random_tensor(gen, rows * dim, DType::BF16);
  const std::vector<int32_t> ids = {3, -1, 10, 9};
  DeviceArray d_table(table.bytes.size()), d_ids(16), d_out(ids.size() * dim * 4);
  d_table.upload(table.data(), table.bytes.size());
  d_ids.upload(ids.data(), 16);
  d_out.poison();
  ASSERT_STATUS_OK(embedding(d_table.get(), DType::BF16, rows, dim, d_ids.get<int32_t>(), 4, d_out.get(), DType::F32,
                             nullptr));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> out = test::download_as_f32(d_out.get(), DType::F32, 4 * dim);
  for (int64_t c = 0; c < dim; ++c) {
    EXPECT_EQ(out[c], table.values[3 * dim + c]);
    EXPECT_TRUE(std::isnan(out[dim + c]));
    EXPECT_TRUE(std::isnan(out[2 * dim + c]));
    EXPECT_EQ(out[3 * dim + c], table.values[9 * dim + c]);
  }
}

TEST(CudaEmbedding, RejectsUnsupportedDtype) {
  FUSELM_REQUIRE_GPU();
  DeviceArray d(1024);
  const Status s = embedding(d.get(), DType::Q8_0, 4, 32, d.get<int32_t>(), 1, d.get(), DType::F32, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unsupported dtype=q8_0"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fuselm
