/// \file
/// The messages between rank 0 and the serving ranks of an MPI job
/// (mpi.h). Each is a reflected node saved as one graph, as the worker
/// protocol's are (protocol.h), framed as an 8-byte request id followed by
/// the graph; a reply carries its request's id. In order:
///
///   HelloRequest -> RankInfo       who the rank is; refused unless protocol
///                                  version and build identity match rank 0's
///   RankConfig   -> CheckReply     its role and rank 0's builder and runner
///                                  options; problems if it cannot serve
///   RankCheck    -> CheckReply     Builder::check / Runner::check there
///   RankBuild    -> RankBuildReply Builder::build there
///   RankRun      -> RankRunReply   Runner::run there
///   RankStop                       the end of the job (no reply)
///
/// A request the rank cannot serve is answered with a RequestError. A
/// serving rank also sends empty messages saying it is alive, and so does
/// rank 0 while it waits on the ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensortune/measure/measurer.h"
#include "tensortune/measure/protocol.h"

namespace tensortune::measure {

/// A serving rank's answer to HelloRequest: who it is, and on what machine.
struct RankInfo : Object {
  int64_t protocol_version = 0;
  std::string build_id;
  int64_t rank = 0;
  std::string host;
  std::string cpu;  ///< the native target of its host
  int64_t cores = 0;
  TT_NODE(RankInfo, "measure.RankInfo")
  static void declare(FieldList<RankInfo>& f);
};

/// A serving rank's role and the options of its builder and runner
/// (rank 0's, so that every rank builds and times alike). Reply: CheckReply.
struct RankConfig : Object {
  LocalBuilderOptions build;
  LocalRunnerOptions run;
  int64_t build_workers = 0;  ///< 0: the rank does not build
  bool runner = false;
  TT_NODE(RankConfig, "measure.RankConfig")
  static void declare(FieldList<RankConfig>& f);
};

/// Builder::check or Runner::check on a serving rank. Reply: CheckReply.
struct RankCheck : Object {
  te::Task task;
  ir::PassContext pass_context;  ///< null for a runner
  bool build = false;
  TT_NODE(RankCheck, "measure.RankCheck")
  static void declare(FieldList<RankCheck>& f);
};

/// A built library's bytes, for a runner on another host.
struct ShippedLibrary : Object {
  std::string sha256;
  std::string base64;
  TT_NODE(ShippedLibrary, "measure.ShippedLibrary")
  static void declare(FieldList<ShippedLibrary>& f);
};

/// Builder::build on a serving rank. Reply: RankBuildReply.
struct RankBuild : Object {
  te::Task task;
  std::vector<schedule::State> states;
  ir::PassContext pass_context;
  bool ship_libraries = false;  ///< return the libraries' bytes too
  TT_NODE(RankBuild, "measure.RankBuild")
  static void declare(FieldList<RankBuild>& f);
};

/// One build result per state of the RankBuild, and the libraries when asked.
struct RankBuildReply : Object {
  std::vector<Ref<BuildResult>> results;
  std::vector<Ref<ShippedLibrary>> libraries;
  TT_NODE(RankBuildReply, "measure.RankBuildReply")
  static void declare(FieldList<RankBuildReply>& f);
};

/// Runner::run on a serving rank. Reply: RankRunReply.
struct RankRun : Object {
  te::Task task;
  std::vector<Ref<BuildResult>> built;
  double best_s = 0;
  double abandon_factor = 0;
  std::vector<Ref<ShippedLibrary>> libraries;  ///< built elsewhere, for this rank to write
  TT_NODE(RankRun, "measure.RankRun")
  static void declare(FieldList<RankRun>& f);
};

/// One outcome per build result of the RankRun.
struct RankRunReply : Object {
  std::vector<Ref<RunOutcome>> outcomes;
  TT_NODE(RankRunReply, "measure.RankRunReply")
  static void declare(FieldList<RankRunReply>& f);
};

/// The end of the job for a serving rank; `reason` says why when it is a failure.
struct RankStop : Object {
  std::string reason;
  bool finalize = true;  ///< false: a rank was lost, and MPI_Finalize could wait for it
  TT_NODE(RankStop, "measure.RankStop")
  static void declare(FieldList<RankStop>& f);
};

}  // namespace tensortune::measure
