#include "lathe/bench/lab/lab_task.h"

#include <cstdlib>

namespace lathe {

namespace {

constexpr int64_t kPage = 4096;

int64_t round_up_to_page(int64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

Json slot_to_json(const LabTensorSlot& slot) {
  Json json = Json::object();
  json.set("name", slot.name);
  json.set("dtype", dtype_name(slot.dtype));
  Json shape = Json::array();
  for (int axis = 0; axis < slot.shape.rank(); ++axis) shape.push(slot.shape[axis]);
  json.set("shape", shape);
  json.set("offset", slot.offset);
  json.set("bytes", slot.bytes);
  return json;
}

LabTensorSlot slot_from_json(const Json& json) {
  LabTensorSlot slot;
  slot.name = json.get("name").as_string("name");
  slot.dtype = parse_dtype(json.get("dtype").as_string("dtype"));
  for (const Json& extent : json.get("shape").items("shape")) slot.shape.push_back(extent.as_int("extent"));
  slot.offset = json.get("offset").as_int("offset");
  slot.bytes = json.get("bytes").as_int("bytes");
  return slot;
}

}  // namespace

LabDType lab_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return LAB_F32;
    case DType::bf16:
      return LAB_BF16;
    case DType::i32:
      return LAB_I32;
    case DType::i64:
      return LAB_I64;
    default:
      return LAB_OTHER;
  }
}

Json LabTask::to_json() const {
  Json json = Json::object();
  Json in = Json::array(), out = Json::array(), named = Json::array();
  for (const auto& slot : inputs) in.push(slot_to_json(slot));
  for (const auto& slot : outputs) out.push(slot_to_json(slot));
  for (const auto& [name, value] : dims) {
    Json dim = Json::object();
    dim.set("name", name);
    dim.set("value", value);
    named.push(dim);
  }
  json.set("inputs", in);
  json.set("outputs", out);
  json.set("dims", named);
  json.set("threads", threads);
  json.set("input_region_bytes", input_region_bytes);
  json.set("total_bytes", total_bytes);
  return json;
}

LabTask LabTask::from_json(const Json& json) {
  LabTask task;
  for (const Json& slot : json.get("inputs").items("inputs")) task.inputs.push_back(slot_from_json(slot));
  for (const Json& slot : json.get("outputs").items("outputs")) task.outputs.push_back(slot_from_json(slot));
  for (const Json& dim : json.get("dims").items("dims"))
    task.dims.emplace_back(dim.get("name").as_string("name"), dim.get("value").as_int("value"));
  task.threads = static_cast<int>(json.get("threads").as_int("threads"));
  task.input_region_bytes = json.get("input_region_bytes").as_int("input_region_bytes");
  task.total_bytes = json.get("total_bytes").as_int("total_bytes");
  return task;
}

LabTask make_lab_task(const std::vector<std::pair<std::string, TensorView>>& inputs,
                      const std::vector<std::pair<std::string, TensorView>>& outputs, const std::string& shape_text,
                      int threads) {
  LabTask task;
  task.threads = threads;
  int64_t offset = 0;
  auto place = [&](const std::pair<std::string, TensorView>& named) {
    LabTensorSlot slot{named.first, named.second.dtype, named.second.shape, offset,
                       named.second.numel() * dtype_size(named.second.dtype)};
    offset += round_up_to_page(std::max<int64_t>(slot.bytes, 1));
    return slot;
  };
  for (const auto& input : inputs) task.inputs.push_back(place(input));
  task.input_region_bytes = offset;
  for (const auto& output : outputs) task.outputs.push_back(place(output));
  task.total_bytes = std::max<int64_t>(offset, kPage);
  // "m=6,n=256,k=40,theta=500000,scaling=llama3": the integer entries become dims.
  size_t start = 0;
  while (start < shape_text.size()) {
    size_t end = shape_text.find(',', start);
    if (end == std::string::npos) end = shape_text.size();
    std::string entry = shape_text.substr(start, end - start);
    size_t equals = entry.find('=');
    if (equals != std::string::npos) {
      std::string value = entry.substr(equals + 1);
      char* rest = nullptr;
      long long number = std::strtoll(value.c_str(), &rest, 10);
      if (!value.empty() && rest && *rest == '\0') task.dims.emplace_back(entry.substr(0, equals), number);
    }
    start = end + 1;
  }
  return task;
}

}  // namespace lathe
