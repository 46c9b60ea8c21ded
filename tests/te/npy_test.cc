// .npy files: what NumPy writes reads back, what we write NumPy reads
// (the header it documents), and damaged files are errors, never crashes.
#include "tensortune/te/npy.h"

#include <gtest/gtest.h>

#include "common/test_util.h"

namespace tensortune::te {
namespace {

TEST(Npy, RoundTripsEveryTypeAndRank) {
  for (DataType t :
       {DataType::float32(), DataType::float64(), DataType::float16(), DataType::int64(),
        DataType::int32(), DataType::int_(8), DataType::uint(8), DataType::boolean()}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {5}, {2, 3}, {2, 0, 4}}) {
      NDArray a = NDArray::random(t, shape, 3, -4, 4);
      std::string bytes = npy_bytes(a);
      EXPECT_EQ((bytes.size() - a.nbytes()) % 64, 0u) << "the header is padded to 64 bytes";
      NDArray b = parse_npy(bytes, "x.npy");
      EXPECT_EQ(b.dtype(), t);
      EXPECT_EQ(b.shape(), shape);
      EXPECT_TRUE(allclose(b, a, Tolerance{})) << a.describe();
    }
  }
}

TEST(Npy, WritesBFloat16AsTheFloat32ValuesItHolds) {
  // NumPy has no bfloat16.
  NDArray a = NDArray::random(DataType::bfloat16(), {3, 4}, 5, -100, 100);
  NDArray b = parse_npy(npy_bytes(a), "x.npy");
  EXPECT_EQ(b.dtype(), DataType::float32());
  ASSERT_EQ(b.shape(), a.shape());
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(b.get(i), a.get(i)) << i;
}

TEST(Npy, WritesTheHeaderNumPyDocuments) {
  NDArray a(DataType::float32(), {2, 3});
  std::string bytes = npy_bytes(a);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            std::string::npos);
  EXPECT_NE(npy_bytes(NDArray(DataType::int64(), {7})).find("'shape': (7,)"), std::string::npos);
  EXPECT_NE(npy_bytes(NDArray(DataType::int64(), {})).find("'shape': ()"), std::string::npos);
}

TEST(Npy, ReadsWhatNumPyWrites) {
  // numpy.save(f, numpy.array([[1, 2]], dtype='<i4')), byte for byte; and the
  // version 2 header numpy uses for big headers.
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string v1 = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) +
                   std::string(1, '\0') + header + std::string("\x01\0\0\0\x02\0\0\0", 8);
  NDArray a = parse_npy(v1, "v1.npy");
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.get_int(1), 2);
  std::string v2 = std::string("\x93NUMPY\x02\x00", 8) + static_cast<char>(header.size()) +
                   std::string(3, '\0') + header + std::string("\x01\0\0\0\x02\0\0\0", 8);
  EXPECT_EQ(parse_npy(v2, "v2.npy").get_int(0), 1);
}

TEST(Npy, DamagedFilesAreErrorsThatNameTheFile) {
  std::string good = npy_bytes(NDArray(DataType::float32(), {2, 3}));
  EXPECT_TT_ERROR(parse_npy("PK\x03\x04 a zip", "in.npy"), kParse, "in.npy: not a .npy file");
  EXPECT_TT_ERROR(parse_npy(good.substr(0, 40), "in.npy"), kParse, "truncated .npy header");
  EXPECT_TT_ERROR(parse_npy(good.substr(0, good.size() - 4), "in.npy"), kParse,
                  "the .npy data is 20 bytes, the header's '<f4' (2, 3) needs 24");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_TT_ERROR(parse_npy(with("False", "True "), "in.npy"), kParse, "Fortran-order");
  EXPECT_TT_ERROR(parse_npy(with("<f4", ">f4"), "in.npy"), kParse,
                  ".npy dtype '>f4' is not supported");
  EXPECT_TT_ERROR(parse_npy(with("(2, 3)", "(2, x)"), "in.npy"), kParse, "malformed .npy shape");
  EXPECT_TT_ERROR(parse_npy(with("(2, 3)", "(99999999999, 99999999999)"), "in.npy"), kParse,
                  "is larger than its");
  EXPECT_TT_ERROR(parse_npy(with("(2, 3)", "(9, 99)"), "in.npy"), kParse, "needs 3564");
  EXPECT_TT_ERROR(parse_npy(with("'shape'", "'shapf'"), "in.npy"), kParse, "has no 'shape'");
  std::string v9 = good;
  v9[6] = 9;
  EXPECT_TT_ERROR(parse_npy(v9, "in.npy"), kParse, ".npy version 9 is not supported");
}

}  // namespace
}  // namespace tensortune::te
