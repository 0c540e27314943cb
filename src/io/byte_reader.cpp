// byte_reader.cpp: the default error of io::ByteReader.
#include "io/byte_reader.h"

#include "oneflow/error.h"

namespace oneflow::io {

void ByteReader::bad(const std::string& what) const { fail("[{}] {}", name_, what); }

}  // namespace oneflow::io
