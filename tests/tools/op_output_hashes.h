// For the benchmark tools: one line per (op, shape, implementation, config) with a hash of its
// outputs, so two builds can be compared bitwise (diff the two listings). Shapes: each op's edge
// shapes and `random_shapes` random ones, those `keep` accepts; outputs are filled with 0xff bytes
// before each run.
#pragma once

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "lathe/io/hash64.h"
#include "lathe/ops/problem.h"

namespace lathe {

inline int print_op_output_hashes(const std::vector<const char*>& ops, int random_shapes,
                                  const std::function<bool(const std::string&)>& keep = {}) {
  for (const char* op : ops) {
    const OpRegistration& registration = find_op(op);
    std::vector<std::string> shapes = registration.edge_shapes;
    for (int seed = 1; seed <= random_shapes; ++seed) shapes.push_back(registration.random_shape(seed));
    for (const std::string& shape : shapes) {
      if (keep && !keep(shape)) continue;
      auto problem = registration.make_problem(ShapeSpec::parse(shape), 7);
      for (const std::string& impl : problem->impl_names())
        for (const ConfigParams& config : problem->config_space(impl)) {
          for (const auto& output : problem->outputs())
            std::memset(output.second.data, 0xff, output.second.numel() * dtype_size(output.second.dtype));
          problem->prepare_run();
          problem->run(impl, &config);
          uint64_t hash = 0;
          for (const auto& output : problem->outputs())
            hash = hash_bytes(output.second.data, output.second.numel() * dtype_size(output.second.dtype), hash);
          std::printf("%s %s %s %s %s\n", op, shape.c_str(), impl.c_str(), config.to_string().c_str(),
                      hex64(hash).c_str());
        }
    }
  }
  return 0;
}

}  // namespace lathe
