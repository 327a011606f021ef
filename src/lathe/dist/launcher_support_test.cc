// check_launcher_supported: which launchers lathe's communicator serves, fed fake environments.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "lathe/core/launcher.h"
#include "lathe/dist/communicator.h"

namespace lathe {
namespace {

LaunchEnvironment detect(const std::map<std::string, std::string>& variables) {
  return detect_launch_environment([&](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

TEST(Launcher, RefusesLaunchersLatheCannotServe) {
  LaunchEnvironment torchrun = detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  const std::string refusal = check_launcher_supported(torchrun, true, true);
  EXPECT_NE(refusal.find("torchrun"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("lathe launch --nproc 2"), std::string::npos) << refusal;
  EXPECT_EQ(refusal.find('\n'), std::string::npos) << refusal;
  EXPECT_EQ(check_launcher_supported(detect({{"RANK", "0"}, {"WORLD_SIZE", "1"}}), true, true), "");

  LaunchEnvironment pmi = detect({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
  EXPECT_NE(check_launcher_supported(pmi, true, true).find("MPICH"), std::string::npos);  // Open MPI build
  EXPECT_EQ(check_launcher_supported(pmi, true, false), "");                              // an MPICH build
  EXPECT_NE(check_launcher_supported(pmi, false, false).find("without MPI"), std::string::npos);

  LaunchEnvironment slurm = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(check_launcher_supported(slurm, true, true), "");
  EXPECT_NE(check_launcher_supported(slurm, false, false).find("Slurm"), std::string::npos);

  LaunchEnvironment open_mpi = detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(check_launcher_supported(open_mpi, true, true), "");
  EXPECT_NE(check_launcher_supported(open_mpi, false, false).find("without MPI"), std::string::npos);
  EXPECT_EQ(check_launcher_supported(LaunchEnvironment{}, false, false), "");
}

}  // namespace
}  // namespace lathe
