// The kernel lab's task layout (what parent and worker agree on) and its verdict table. The lab's
// behaviour on real candidates, good and bad, is the ctest kernel_lab (tests/lab/lab_test.sh).
#include "lathe/bench/lab/lab.h"

#include <gtest/gtest.h>

#include <set>

#include "lathe/bench/lab/lab_task.h"

namespace lathe {
namespace {

TEST(LabTask, TensorsArePageAlignedInputsFirstAndDimsAreTheIntegerEntries) {
  Tensor x = Tensor::empty({3, 5}, DType::f32), bias = Tensor::empty({7}, DType::bf16);
  Tensor y = Tensor::empty({3, 1030}, DType::f32), count = Tensor::empty({2}, DType::i64);
  LabTask task = make_lab_task({{"x", x.view()}, {"bias", bias.view()}}, {{"y", y.view()}, {"count", count.view()}},
                               "m=3,n=1030,theta=5e5,scaling=llama3,k=-2", 4);
  ASSERT_EQ(task.inputs.size(), 2u);
  ASSERT_EQ(task.outputs.size(), 2u);
  int64_t end = 0;
  for (const auto* slots : {&task.inputs, &task.outputs})
    for (const LabTensorSlot& slot : *slots) {
      EXPECT_EQ(slot.offset % 4096, 0) << slot.name;
      EXPECT_GE(slot.offset, end) << slot.name;  // no overlap, in order
      end = slot.offset + slot.bytes;
    }
  EXPECT_EQ(task.inputs[1].bytes, 7 * 2);
  EXPECT_EQ(task.outputs[0].bytes, 3 * 1030 * 4);
  EXPECT_LE(task.inputs.back().offset + task.inputs.back().bytes, task.input_region_bytes);
  EXPECT_EQ(task.input_region_bytes, task.outputs.front().offset);
  EXPECT_GE(task.total_bytes, end);
  // Only integers become dims ("5e5" and "llama3" do not).
  std::vector<std::pair<std::string, int64_t>> dims = {{"m", 3}, {"n", 1030}, {"k", -2}};
  EXPECT_EQ(task.dims, dims);
  LabTask back = LabTask::from_json(Json::parse(task.to_json().dump()));
  EXPECT_EQ(back.to_json().dump(), task.to_json().dump());
  EXPECT_EQ(back.outputs[1].dtype, DType::i64);
  EXPECT_EQ(back.threads, 4);
  EXPECT_EQ(lab_dtype(DType::bf16), LAB_BF16);
  EXPECT_EQ(lab_dtype(DType::u8), LAB_OTHER);
}

TEST(LabVerdicts, EachHasItsOwnNameAndExitCodeAndOnlyPassExitsZero) {
  const LabVerdict all[] = {LabVerdict::pass,    LabVerdict::compile_error, LabVerdict::crash,
                            LabVerdict::timeout, LabVerdict::out_of_bounds, LabVerdict::nan,
                            LabVerdict::wrong,   LabVerdict::too_fast,      LabVerdict::candidate_error};
  std::set<std::string> names;
  std::set<int> codes;
  for (LabVerdict verdict : all) {
    names.insert(lab_verdict_name(verdict));
    int code = lab_exit_code(verdict);
    codes.insert(code);
    EXPECT_EQ(code == 0, verdict == LabVerdict::pass);
    EXPECT_NE(code, 1);  // 1 and 2 are lathe's own (failure, bad input)
    EXPECT_NE(code, 2);
  }
  EXPECT_EQ(names.size(), std::size(all));
  EXPECT_EQ(codes.size(), std::size(all));
}

TEST(LabBadInput, UnknownProblemListsTheNamesAndOpProblemsWithoutNamedInputsAreRefused) {
  try {
    describe_lab_problem("no_such_problem", true);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("gemm_relu_scale"), std::string::npos);
  }
  EXPECT_THROW(describe_lab_problem("rope", true), Error);  // an op's problem without named inputs
  // An op's problem whose registration names its inputs (OpSuiteProblem::InputsFn).
  const std::string rms_norm = describe_lab_problem("rms_norm", true);
  EXPECT_NE(rms_norm.find("inputs[0] x: f32 (13, 37)"), std::string::npos) << rms_norm;
  EXPECT_NE(rms_norm.find("inputs[1] weight: f32 (37)"), std::string::npos) << rms_norm;
  EXPECT_NE(rms_norm.find("outputs[1] inv_rms: f32 (13)"), std::string::npos) << rms_norm;
  EXPECT_NE(describe_lab_problem("gemm_relu_scale", true).find("inputs[1] w: f32 (256, 40)"), std::string::npos);
}

}  // namespace
}  // namespace lathe
