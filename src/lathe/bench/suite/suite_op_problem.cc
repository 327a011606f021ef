#include "lathe/bench/suite/suite_op_problem.h"

namespace lathe {

OpSuiteProblem::OpSuiteProblem(SuiteInfo info, std::string op, const std::string& shape, VendorPath vendor,
                               InputsFn inputs)
    : SuiteProblem(std::move(info), shape),
      op_(find_op(op)),
      shape_(ShapeSpec::parse(shape)),
      vendor_(std::move(vendor)),
      inputs_(std::move(inputs)) {
  fill_inputs(0);
  if (mutable_info().lathe_path.empty()) mutable_info().lathe_path = op_.name;
  if (!vendor_ && mutable_info().vendor.empty()) {
    std::vector<std::string> peers = problem_->peers();
    if (!peers.empty()) {
      peer_ = peers.front();
      mutable_info().vendor = str_cat(peer_, " (", op_.name, "'s benchmark peer)");
    }
  }
}

void OpSuiteProblem::fill_inputs(uint64_t seed) {
  problem_ = op_.make_problem(shape_, seed);
  live_ = problem_.get();
}

void OpSuiteProblem::run_vendor() {
  if (vendor_) return vendor_(live());
  LATHE_CHECK(!peer_.empty(), info().name, ": no vendor baseline");
  live().run_peer(peer_);
}

void OpSuiteProblem::add_cold_copy(uint64_t seed) { copies_.push_back(op_.make_problem(shape_, seed)); }

void add_op_suite_problem(std::vector<SuiteEntry>& entries, const SuiteInfo& info, const std::string& op,
                          const std::string& full, const std::string& quick, const OpSuiteProblem::VendorPath& vendor,
                          const OpSuiteProblem::InputsFn& inputs) {
  entries.push_back({info.name, info.family, [=](bool is_quick) -> std::unique_ptr<SuiteProblem> {
                       return std::make_unique<OpSuiteProblem>(info, op, is_quick ? quick : full, vendor, inputs);
                     }});
}

}  // namespace lathe
