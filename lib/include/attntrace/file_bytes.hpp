#pragma once
// The bytes of an input file, memory-mapped when it is a regular file (large inputs are never
// copied just to be parsed), read into memory when it is stdin ("-") or a pipe.
#include <cstddef>
#include <string>
#include <string_view>

namespace attntrace {

class FileBytes {
public:
    // Throws InputError "<path>: no such file", "<path>: is a directory", "<path>: <strerror>".
    static FileBytes open(const std::string& path);

    FileBytes(FileBytes&& other) noexcept;
    FileBytes& operator=(FileBytes&& other) noexcept;
    FileBytes(const FileBytes&) = delete;
    FileBytes& operator=(const FileBytes&) = delete;
    ~FileBytes();

    std::string_view bytes() const { return {data_, size_}; }
    const std::string& name() const { return name_; }

private:
    FileBytes() = default;
    std::string name_;
    const char* data_ = nullptr;
    std::size_t size_ = 0;
    void* mapping_ = nullptr;   // non-null when mmap'ed
    std::string buffer_;        // holds stdin / pipe contents
};

}  // namespace attntrace
