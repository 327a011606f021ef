#include "lathe/core/launcher.h"

#include <gtest/gtest.h>

#include <map>

#include "lathe/core/error.h"

namespace lathe {
namespace {

LaunchEnvironment detect(const std::map<std::string, std::string>& variables) {
  return detect_launch_environment([&](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

TEST(Launcher, NoneWithoutVariables) {
  LaunchEnvironment environment = detect({{"HOME", "/root"}, {"RANK", "3"}});  // RANK alone is no launcher
  EXPECT_EQ(environment.launcher, Launcher::none);
  EXPECT_EQ(environment.rank, 0);
  EXPECT_EQ(environment.world_size, 1);
}

TEST(Launcher, EachLaunchersVariables) {
  LaunchEnvironment open_mpi = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(open_mpi.launcher, Launcher::open_mpi);
  EXPECT_EQ(open_mpi.rank, 3);
  EXPECT_EQ(open_mpi.world_size, 4);
  EXPECT_EQ(open_mpi.local_rank, 1);
  EXPECT_EQ(open_mpi.local_world_size, 2);

  LaunchEnvironment pmi =
      detect({{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "4"}});
  EXPECT_EQ(pmi.launcher, Launcher::pmi);
  EXPECT_EQ(pmi.rank, 5);
  EXPECT_EQ(pmi.world_size, 8);
  EXPECT_EQ(pmi.local_rank, 1);
  EXPECT_EQ(pmi.local_world_size, 4);

  LaunchEnvironment slurm = detect(
      {{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "2"}, {"SLURM_NTASKS_PER_NODE", "4(x2)"}});
  EXPECT_EQ(slurm.launcher, Launcher::slurm);
  EXPECT_EQ(slurm.rank, 6);
  EXPECT_EQ(slurm.world_size, 8);
  EXPECT_EQ(slurm.local_rank, 2);
  EXPECT_EQ(slurm.local_world_size, 4);

  LaunchEnvironment torchrun = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(torchrun.launcher, Launcher::torchrun);
  EXPECT_EQ(torchrun.rank, 1);
  EXPECT_EQ(torchrun.world_size, 2);
  EXPECT_EQ(torchrun.local_rank, 1);
  EXPECT_EQ(torchrun.local_world_size, 2);  // LOCAL_WORLD_SIZE unset: the whole world
}

TEST(Launcher, OpenMpiWinsOverTheSlurmAllocationItRunsIn) {
  // mpirun inside an sbatch script: Slurm's variables describe the allocation, Open MPI's the ranks.
  LaunchEnvironment environment = detect(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(environment.launcher, Launcher::open_mpi);
  EXPECT_EQ(environment.rank, 1);
  EXPECT_EQ(environment.world_size, 2);
}

TEST(Launcher, MalformedVariablesAreOneClearError) {
  for (const auto& [name, value] : std::map<std::string, std::string>{{"RANK", "one"}, {"WORLD_SIZE", "-2"}}) {
    std::map<std::string, std::string> variables = {{"RANK", "0"}, {"WORLD_SIZE", "2"}};
    variables[name] = value;
    try {
      detect(variables);
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(name + "='" + value + "'"), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(detect({{"PMI_RANK", "4"}, {"PMI_SIZE", "4"}}), Error);  // rank not below the world
}

}  // namespace
}  // namespace lathe
