/// \file
/// The folder of a compiled model, written so that it appears whole or not
/// at all and never in place of something the user made, and read back so
/// that nothing in it is used before it is checked:
///   manifest.json  what wrote the folder, and each file's size and SHA-256
///   plan.json      the plan (plan.h), through the object codec
///   model.so       the kernels and weight packers
///   weights.bin    the constants, 64-byte aligned
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tensortune/runtime/plan.h"

namespace tensortune::runtime {

/// One file of a compiled model's folder.
struct ManifestFileNode : Object {
  std::string name;
  int64_t bytes = 0;
  std::string sha256;
  TT_NODE(ManifestFileNode, "runtime.ManifestFile")
  static void declare(FieldList<ManifestFileNode>& f);
};

/// manifest.json: the mark of a folder this program wrote, and its contents.
struct ManifestNode : Object {
  std::string format = "tensortune.model";
  int64_t version = 2;
  std::vector<Ref<ManifestFileNode>> files;
  TT_NODE(ManifestNode, "runtime.Manifest")
  static void declare(FieldList<ManifestNode>& f);
};
using Manifest = Ref<ManifestNode>;

/// A compiled model's contents, in memory.
struct ModelFiles {
  ModelPlan plan;
  std::string library;  ///< model.so's bytes
  std::string weights;  ///< weights.bin's bytes
};

/// Refuses (kInvalidArgument, naming it) a destination that write_model_folder
/// would refuse: `dest` exists and is not a compiled model folder holding only
/// the files its manifest lists, or `dest` is or contains one of `protect`
/// (the files the model is compiled from). Call it before the work.
void check_model_destination(const std::string& dest, const std::vector<std::string>& protect);

/// Writes `files` as the folder `dest`: into a new sibling directory, renamed
/// into place when complete; a compiled model already at `dest` is replaced
/// (and then removed, file by file), anything else refused as
/// check_model_destination says.
void write_model_folder(const std::string& dest, const ModelFiles& files,
                        const std::vector<std::string>& protect = {});

/// Reads a compiled model's folder: the manifest first, then each file,
/// checked against its size and (when `verify`) its SHA-256 before it is
/// used, then the plan, checked whole (check_plan). Errors name the folder
/// and the file: kNotFound without a manifest, kParse for anything damaged.
ModelFiles read_model_folder(const std::string& dir, bool verify = true);

}  // namespace tensortune::runtime
