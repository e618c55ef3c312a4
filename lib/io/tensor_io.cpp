// Loading (format detection) and saving (format by extension) of tensor files. The formats
// themselves live in npy.cpp and json_tensor.cpp, atomic writing in atomic_write.cpp.
#include "attntrace/io/tensor_io.hpp"

#include <bit>
#include <filesystem>
#include <string>
#include <system_error>

#include <sys/stat.h>

#include "attntrace/io/atomic_write.hpp"
#include "attntrace/tensor/errors.hpp"
#include "attntrace/io/file_bytes.hpp"
#include "attntrace/io/json_tensor.hpp"
#include "attntrace/io/npy.hpp"
#include "attntrace/io/sniff.hpp"

namespace attntrace {

namespace fs = std::filesystem;

// ---- reading ----------------------------------------------------------------------------------

namespace {

// parse_tensor, reading a .npy's data through FILE when there is one (parse_npy).
template <class T>
LoadedTensor<T> parse_tensor_from(std::string_view bytes, const std::string& name, const FileBytes* file) {
    switch (sniff_format(bytes, bytes.size())) {
    case Sniffed::npy: return parse_npy<T>(bytes, name, file);
    case Sniffed::json: return parse_json_tensor<T>(bytes, name);
    case Sniffed::empty: throw InputError(name + ": empty file");
    case Sniffed::blank: throw InputError(name + ": empty file (only whitespace)");
    case Sniffed::safetensors:
        throw InputError(name + ": not a .npy or JSON tensor (starts with " + bytes_repr(bytes, 8) +
                         "); a .safetensors file holds named tensors: read it as attention parameters");
    case Sniffed::unknown: break;
    }
    std::string message = name + ": not a .npy or JSON tensor (starts with " + bytes_repr(bytes, 8) + ")";
    if (bytes.starts_with("PK\x03\x04")) {
        message += "; a zip archive (.npz, or torch.save output) holds several arrays: save one with numpy.save";
    }
    throw InputError(message);
}

}  // namespace

template <class T>
LoadedTensor<T> load_tensor(const std::string& path) {
    const FileBytes file = FileBytes::open(path);
    return parse_tensor_from<T>(file.bytes(), path, &file);
}

template <class T>
LoadedTensor<T> parse_tensor(std::string_view bytes, const std::string& name) {
    return parse_tensor_from<T>(bytes, name, nullptr);
}

// ---- writing ----------------------------------------------------------------------------------

std::optional<FileFormat> format_from_extension(const std::string& path) {
    std::string extension = fs::path(path).extension().string();
    for (char& c : extension) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    if (extension == ".npy") return FileFormat::npy;
    if (extension == ".json") return FileFormat::json;
    return std::nullopt;
}

namespace {

// The format for PATH when its extension gives none: npy for an existing file that is not a
// regular file (/dev/null, a FIFO, as for "-"). A directory is an OutputError.
std::optional<FileFormat> format_of_existing(const std::string& path) {
    struct stat info {};
    const bool exists = ::stat(path.c_str(), &info) == 0;
    if ((exists && S_ISDIR(info.st_mode)) || (!exists && !path.empty() && path.back() == '/')) {
        throw OutputError(path + ": is a directory");
    }
    if (exists && !S_ISREG(info.st_mode)) return FileFormat::npy;
    return std::nullopt;
}

}  // namespace

template <class T>
void save_tensor(const std::string& path, const Array<T>& array, std::optional<FileFormat> format) {
    if (!format) format = format_from_extension(path);
    if (!format && path != "-") format = format_of_existing(path);
    if (!format) {
        throw UsageError(path + ": cannot tell the format from the extension; use .npy or .json (or name the format)");
    }
    if (*format == FileFormat::json) return write_file_atomically(path, json_tensor_text<T>(array));
    if constexpr (std::endian::native == std::endian::little) {  // the data as it is in memory
        const std::string header = npy_header<T>(Shape(array.shape().begin(), array.shape().end()));
        const std::string_view data(reinterpret_cast<const char*>(array.data()), array.size() * sizeof(T));
        write_file_atomically(path, {std::string_view(header), data});
    } else {
        write_file_atomically(path, npy_bytes<T>(array));
    }
}

void ensure_not_an_input(const std::string& output, const std::vector<std::string>& inputs) {
    if (output == "-") return;
    std::error_code error;
    if (!fs::exists(output, error)) return;
    for (const std::string& input : inputs) {
        if (input == "-") continue;
        if (fs::equivalent(output, input, error) && !error) {
            throw OutputError(output + ": refusing to overwrite an input file" +
                              (input == output ? std::string() : " (" + input + ")"));
        }
    }
}

template LoadedTensor<float> load_tensor<float>(const std::string&);
template LoadedTensor<double> load_tensor<double>(const std::string&);
template LoadedTensor<float> parse_tensor<float>(std::string_view, const std::string&);
template LoadedTensor<double> parse_tensor<double>(std::string_view, const std::string&);
template void save_tensor<float>(const std::string&, const Array<float>&, std::optional<FileFormat>);
template void save_tensor<double>(const std::string&, const Array<double>&, std::optional<FileFormat>);

}  // namespace attntrace
