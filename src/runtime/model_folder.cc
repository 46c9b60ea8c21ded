#include "tensortune/runtime/model_folder.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "tensortune/object/serialize.h"
#include "tensortune/support/checked.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"
#include "tensortune/support/subprocess.h"

namespace tensortune::runtime {

void ManifestFileNode::declare(FieldList<ManifestFileNode>& f) {
  f.def("name", &ManifestFileNode::name)
      .def("bytes", &ManifestFileNode::bytes)
      .def("sha256", &ManifestFileNode::sha256);
}

void ManifestNode::declare(FieldList<ManifestNode>& f) {
  f.def("format", &ManifestNode::format)
      .def("version", &ManifestNode::version)
      .def("files", &ManifestNode::files);
}

TT_REGISTER_NODE(ManifestFileNode);
TT_REGISTER_NODE(ManifestNode);

namespace {

namespace fs = std::filesystem;

constexpr const char* kManifest = "manifest.json";
constexpr const char* kFormat = "tensortune.model";
constexpr int64_t kVersion = 2;
/// The files of a model folder, in the order they are written (the manifest last).
constexpr const char* kPlan = "plan.json";
constexpr const char* kLibrary = "model.so";
constexpr const char* kWeights = "weights.bin";

/// The manifest of `dir`, checked: the format, the version, and file names
/// that are the ones this program writes, each once. kNotFound when there is
/// none; kParse naming what is wrong otherwise.
Manifest read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifest).string();
  std::optional<std::string> text = read_file_if_exists(path);
  if (!text) {
    bool is_dir = fs::is_directory(dir);
    fail(ErrorKind::kNotFound, "'", dir, "' is not a compiled model (",
         is_dir ? "no manifest.json" : "no such folder",
         "); make one with `tensortune compile MODEL.onnx -o DIR`");
  }
  Manifest m;
  try {
    ObjectPtr node = load_string(*text);
    m = Manifest(std::dynamic_pointer_cast<const ManifestNode>(node));
    TT_CHECK(m, kParse, "it holds a ", node ? std::string(node->type_key()) : "null",
             ", not a runtime.Manifest");
  } catch (const UserError& e) {
    fail(ErrorKind::kParse, "'", dir, "' is not a compiled model tensortune can read: ", path, ": ",
         e.what());
  }
  TT_CHECK(m->format == kFormat, kParse, path, ": format is '", m->format, "', not '", kFormat,
           "'");
  TT_CHECK(m->version == kVersion, kParse, path, ": format version ", m->version,
           "; this build reads ", kVersion);
  std::set<std::string> names;
  for (const auto& f : m->files) {
    TT_CHECK(f, kParse, path, ": a null file entry");
    TT_CHECK(f->name == kPlan || f->name == kLibrary || f->name == kWeights, kParse, path,
             ": lists '", f->name, "', which is no file of a compiled model (", kPlan, ", ",
             kLibrary, ", ", kWeights, ")");
    TT_CHECK(names.insert(f->name).second, kParse, path, ": lists '", f->name, "' twice");
    TT_CHECK(f->bytes >= 0 && f->bytes <= kMaxBufferBytes, kParse, path, ": '", f->name, "' has ",
             f->bytes, " bytes");
  }
  TT_CHECK(names.size() == 3, kParse, path, ": lists ", names.size(), " files, not the 3 of ",
           kPlan, ", ", kLibrary, " and ", kWeights);
  return m;
}

/// The names in `dir` (without . and ..).
std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  TT_CHECK(!ec, kIO, "cannot list '", dir, "': ", ec.message());
  return names;
}

/// Files of `dir` not in its manifest (nor the manifest itself).
std::vector<std::string> foreign_entries(const std::string& dir, const ManifestNode& m) {
  std::set<std::string> ours = {kManifest};
  for (const auto& f : m.files) ours.insert(f->name);
  std::vector<std::string> foreign;
  for (const auto& name : entries_of(dir)) {
    if (!ours.count(name)) foreign.push_back(name);
  }
  return foreign;
}

/// The destination's parent folder, where the new folder is written first.
fs::path parent_of(const fs::path& dest) {
  fs::path parent = dest.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void write_whole(const fs::path& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  TT_CHECK(fd >= 0, kIO, "cannot create '", path.string(), "': ", std::strerror(errno));
  FileDescriptor owned(fd);
  write_all(fd, bytes, path.string());
}

/// Removes a folder this program wrote: the files its manifest lists, the
/// manifest, then the (now empty) folder. Anything else in it stays.
void remove_model_files(const fs::path& dir, const ManifestNode& m) {
  for (const auto& f : m.files) ::unlink((dir / f->name).c_str());
  ::unlink((dir / kManifest).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace

void check_model_destination(const std::string& dest, const std::vector<std::string>& protect) {
  TT_CHECK(!dest.empty(), kInvalidArgument, "the compiled model's folder name is empty");
  std::error_code ec;
  (void)fs::weakly_canonical(fs::absolute(dest), ec);  // only whether it resolves
  TT_CHECK(!ec, kInvalidArgument, "cannot resolve the output '", dest, "': ", ec.message());
  for (const std::string& input : protect) {
    if (input.empty() || !path_is_within(input, dest)) continue;
    fail(ErrorKind::kInvalidArgument, "the output '", dest, "' ",
         path_is_within(dest, input) ? "is" : "contains", " the input '", input,
         "': choose an output folder of its own");
  }
  struct stat st {};
  if (::lstat(dest.c_str(), &st) != 0) {
    TT_CHECK(errno == ENOENT, kIO, "cannot look at the output '", dest,
             "': ", std::strerror(errno));
    return;
  }
  TT_CHECK(S_ISDIR(st.st_mode), kInvalidArgument, "the output '", dest,
           "' exists and is not a folder; tensortune replaces only a compiled model it wrote: "
           "choose another -o, or remove it yourself");
  Manifest m;
  try {
    m = read_manifest(dest);
  } catch (const UserError& e) {
    fail(ErrorKind::kInvalidArgument, "the output '", dest,
         "' exists and is not a compiled model tensortune wrote (", e.what(),
         "); choose another -o, or remove it yourself");
  }
  std::vector<std::string> foreign = foreign_entries(dest, *m);
  TT_CHECK(foreign.empty(), kInvalidArgument, "the output '", dest,
           "' is a compiled model, but also holds '", foreign.empty() ? "" : foreign.front(),
           "', which tensortune did not write; it replaces only what it wrote: move that "
           "away, or choose another -o");
}

void write_model_folder(const std::string& dest, const ModelFiles& files,
                        const std::vector<std::string>& protect) {
  check_model_destination(dest, protect);
  check_plan(*files.plan);
  TT_CHECK(files.plan->weights_bytes == static_cast<int64_t>(files.weights.size()), kInternal,
           "the plan's weights_bytes is ", files.plan->weights_bytes, ", the weights ",
           files.weights.size());
  fs::path target(dest);
  while (!target.empty() && !target.has_filename()) target = target.parent_path();  // "dir/"
  std::error_code ec;
  fs::create_directories(parent_of(target), ec);  // as `mkdir -p`: missing parents only
  TT_CHECK(!ec, kIO, "cannot create the folder of '", dest, "': ", ec.message());
  std::string tmpl = (parent_of(target) / ("." + target.filename().string() + ".tmp-XXXXXX"));
  TT_CHECK(::mkdtemp(tmpl.data()), kIO, "cannot create a folder beside '", dest,
           "': ", std::strerror(errno));
  const fs::path tmp(tmpl);
  auto manifest = make_node<ManifestNode>();
  try {
    std::string plan_text = save_string(files.plan, 1);
    for (auto [name, bytes] : {std::pair<const char*, std::string_view>{kPlan, plan_text},
                               {kLibrary, files.library},
                               {kWeights, files.weights}}) {
      write_whole(tmp / name, bytes);
      auto f = make_node<ManifestFileNode>();
      f->name = name;
      f->bytes = static_cast<int64_t>(bytes.size());
      f->sha256 = sha256_hex(bytes);
      manifest->files.emplace_back(std::move(f));
    }
    // The manifest last: a folder without one is not a model.
    write_whole(tmp / kManifest, save_string(Manifest(manifest), 1));
    // mkdtemp made it private; a model folder is as readable as any file.
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::chmod(tmp.c_str(), 0777 & ~mask);

    // Into place: beside nothing (no replace), or swapped with the model
    // that is there (checked above), which is then removed file by file.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0) {
      return;
    }
    int err = errno;
    TT_CHECK(err == EEXIST || err == ENOTEMPTY, kIO, "cannot move the compiled model to '", dest,
             "': ", std::strerror(err));
    check_model_destination(dest, protect);  // what is there now, not what was
    Manifest old = read_manifest(dest);
    TT_CHECK(::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0,
             kIO, "cannot replace the compiled model '", dest, "': ", std::strerror(errno));
    remove_model_files(tmp, *old);
  } catch (...) {
    for (const char* name : {kPlan, kLibrary, kWeights, kManifest}) ::unlink((tmp / name).c_str());
    ::rmdir(tmp.c_str());
    throw;
  }
}

ModelFiles read_model_folder(const std::string& dir, bool verify) {
  Manifest manifest = read_manifest(dir);
  std::map<std::string, std::string> contents;
  for (const auto& f : manifest->files) {
    const std::string path = (fs::path(dir) / f->name).string();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    TT_CHECK(fd >= 0, kParse, dir, ": the manifest lists ", f->name, ", which cannot be opened (",
             std::strerror(errno), ")");
    FileDescriptor owned(fd);
    struct stat st {};
    TT_CHECK(::fstat(fd, &st) == 0 && S_ISREG(st.st_mode), kParse, dir, ": ", f->name,
             " is not a plain file");
    // The size first: a truncated or swapped file is refused before it is read.
    TT_CHECK(st.st_size == f->bytes, kParse, dir, ": ", f->name, " has ",
             static_cast<int64_t>(st.st_size), " bytes, but the manifest says ", f->bytes,
             " (a damaged or altered model: compile it again)");
    std::string bytes;
    bytes.reserve(static_cast<size_t>(f->bytes));
    TT_CHECK(read_all(fd, bytes), kIO, dir, ": cannot read ", f->name, ": ", std::strerror(errno));
    TT_CHECK(static_cast<int64_t>(bytes.size()) == f->bytes, kParse, dir, ": ", f->name,
             " changed while it was read");
    if (verify) {
      std::string digest = sha256_hex(bytes);
      TT_CHECK(digest == f->sha256, kParse, dir, ": ", f->name, " has SHA-256 ", digest,
               ", but the manifest says ", f->sha256,
               " (a damaged or altered model: compile it again; --no-verify skips this check)");
    }
    contents[f->name] = std::move(bytes);
  }
  ModelFiles files;
  try {
    ObjectPtr node = load_string(contents[kPlan]);
    files.plan = ModelPlan(std::dynamic_pointer_cast<const ModelPlanNode>(node));
    TT_CHECK(files.plan, kParse, "it holds a ", node ? std::string(node->type_key()) : "null",
             ", not a runtime.ModelPlan");
  } catch (const UserError& e) {
    fail(ErrorKind::kParse, dir, ": plan.json: ", e.what());
  }
  files.library = std::move(contents[kLibrary]);
  files.weights = std::move(contents[kWeights]);
  return files;
}

}  // namespace tensortune::runtime
