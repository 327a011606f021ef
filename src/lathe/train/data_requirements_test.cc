// What train/ hands data/ for a config: the batch geometry and seed, and the model family's default
// chat template, which must be one data/chat_template.h knows (data/ never looks at families).
#include <gtest/gtest.h>

#include <string>

#include "lathe/data/chat_template.h"
#include "lathe/models/family_spec.h"
#include "lathe/train/train_config.h"

namespace lathe {
namespace {

TEST(DataRequirements, CarryTheRunsGeometryAndTheFamilysChatTemplate) {
  for (const FamilySpec* spec : all_family_specs()) {
    SCOPED_TRACE(spec->name);
    TrainConfig config;
    config.model.family = spec->name;
    config.model.vocab_size = 512;
    config.train.seq_len = 48;
    config.train.seed = 77;
    const DataRequirements requirements = data_requirements(config);
    EXPECT_EQ(requirements.vocab_size, 512);
    EXPECT_EQ(requirements.seq_len, 48);
    EXPECT_EQ(requirements.seed, 77u);
    EXPECT_EQ(requirements.family_chat_template, std::string(spec->default_chat_template));
    // data/ can resolve it: the name parses and prints back as itself.
    EXPECT_EQ(to_string(parse_chat_template(requirements.family_chat_template)), requirements.family_chat_template);
  }
}

}  // namespace
}  // namespace lathe
