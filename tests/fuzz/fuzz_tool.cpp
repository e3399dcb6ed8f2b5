// The fuzz targets' companion, built in every build (no libFuzzer needed):
//
//   fuzz_tool seeds <corpus-dir> <out-dir>      writes the seed corpora: <out-dir>/pattern/ from every
//                                               `$ einc explain ...` line of tests/corpus,
//                                               <out-dir>/npy/ from .npy files of every dtype and format,
//                                               <out-dir>/corpus/ from the lines of the `einc aot`
//                                               corpora (tests/aot, examples/aot) and some bad ones
//   fuzz_tool check-seeds <corpus-dir>          runs every seed through its target's checks (a test)
//   fuzz_tool replay pattern|npy|corpus <path>...  runs files, or every file in directories, through a
//                                               target's checks: crashes found, tests/fuzz/regressions
//
// A failing check aborts with the input printed (see harness.hpp).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "runtime/npy.hpp"
#include "runtime/tensor.hpp"
#include "tests/fuzz/harness.hpp"
#include "tests/shell_words.hpp"

namespace fs = std::filesystem;
using namespace einc;

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes to_bytes(std::string_view text) {
    return Bytes(text.begin(), text.end());
}

// `einc explain <op> [options] <pattern> [reduction] <shapes>` in the fuzz case format: the words go
// where the case format reads them (options the format has no line for are dropped).
std::string pattern_seed(const std::vector<std::string>& words) {
    std::string head, pattern, shapes, sizes, packed;
    std::size_t positional = 0;
    for (std::size_t i = 2; i < words.size(); ++i) {
        const std::string& w = words[i];
        const bool has_value = i + 1 < words.size();
        if ((w == "-a" || w == "--axis") && has_value)
            sizes += words[++i] + " ";
        else if (w == "--packed" && has_value)
            packed += words[++i] + " ";
        else if (w == "--dtype" && has_value)
            head += " " + words[++i];
        else if (w == "--compact")
            head += " compact";
        else if ((w == "--print" || w == "--device" || w == "--backend" || w == "-o") && has_value)
            ++i;
        else if (w.starts_with("--"))
            continue;
        else if (positional++ == 0)
            head = w + head;
        else if (positional == 2)
            pattern = w;
        else if (reduction_named(w))
            head += " " + w;
        else
            shapes += w + " ";
    }
    return fmt::format("{}\n{}\n{}\n{}\n{}\n", head, pattern, shapes, sizes, packed);
}

std::vector<Bytes> pattern_seeds(const fs::path& corpus) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(corpus))
        if (entry.is_regular_file() && entry.path().extension() == ".txt") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    std::vector<Bytes> seeds;
    for (const fs::path& file : files) {
        std::ifstream in(file);
        for (std::string line; std::getline(in, line);) {
            if (!line.starts_with("$ einc explain ")) continue;
            const std::vector<std::string> words =
                testing::shell_words(line.substr(2)).value_or(std::vector<std::string>{});
            if (words.size() >= 4) seeds.push_back(to_bytes(pattern_seed(words)));
        }
    }
    // A few the corpus has no line for: other dtypes run, many operands, deep groups, big sizes.
    for (const char* extra :
         {"reduce mean f16\nb (h 2) w -> b h\n2x4x3\n\n\n",
          "einsum i64\na b, b c, c d, d e -> a e\n2x3 3x2 2x2 2x3\n\n\n",
          "repeat bool\na -> a b 2\n3\nb=2\n\n", "einsum bf16 compact\n...ij,jk->...ik\n2x2x3 3x2\n\n\n",
          "rearrange\n(a b c) -> c b a\n4611686018427387904\nb=2 c=2\n\n", "pack i8\n* c\n2x3 3 4x1x3\n\n\n",
          "unpack f64\nb * c\n2x7x3\n\n2x2 -1\n"})
        seeds.push_back(to_bytes(extra));
    return seeds;
}

// .npy files: every dtype in every shape kind, written by einc, plus the variants numpy writes.
std::vector<Bytes> npy_seeds() {
    std::vector<Bytes> seeds;
    const auto add = [&](const std::vector<std::byte>& bytes) {
        seeds.emplace_back(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                           reinterpret_cast<const std::uint8_t*>(bytes.data()) + bytes.size());
    };
    for (const DType dtype : all_dtypes)
        for (const Shape& shape : {Shape{}, Shape{0}, Shape{3}, Shape{2, 3}, Shape{1, 2, 1, 2}}) {
            Tensor tensor = Tensor::zeros(dtype, shape);
            for (std::size_t i = 0; i < tensor.nbytes(); ++i)
                static_cast<std::uint8_t*>(tensor.data())[i] = static_cast<std::uint8_t>(i % 2);
            add(npy_bytes(tensor.view()));
        }
    const auto by_hand = [&](std::string header, std::string data, int major) {
        std::string file = "\x93NUMPY";
        file += static_cast<char>(major);
        file += '\0';
        for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
            file += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
        seeds.push_back(to_bytes(file + header + data));
    };
    const std::string six(24, '\x01');
    by_hand("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }\n", six, 1);
    by_hand("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", six, 1);
    by_hand("{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<i4\"}\n", six, 2);
    by_hand("{'descr': '=i4', 'fortran_order': False, 'shape': (6,)}  \n", six, 3);
    by_hand("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n", six, 1);
    return seeds;
}

// `einc aot` corpus lines: each line of the project's corpora (<corpus-dir>/../aot, examples/aot) alone,
// a few together, and lines that must be errors.
std::vector<Bytes> corpus_seeds(const fs::path& corpus) {
    const fs::path tests = fs::weakly_canonical(corpus).parent_path();
    std::vector<Bytes> seeds;
    for (const fs::path& file :
         {tests / "aot" / "kernels.txt", tests.parent_path() / "examples" / "aot" / "kernels.txt"}) {
        std::ifstream in(file);
        std::string together;
        for (std::string line; std::getline(in, line);) {
            if (line.empty() || line.starts_with("#")) continue;
            seeds.push_back(to_bytes(line + "\n"));
            if (seeds.size() % 8 == 0) seeds.push_back(to_bytes(std::exchange(together, {})));
            together += line + "\n";
        }
    }
    for (const char* bad :
         {"rearrange \"a b -> b c\" 3x4\n", "rearrange \"a b -> b a\" 3x4 --frobnicate\n",
          "rearrange \"a b -> b a 3x4\n", "einsum \"i j, j k -> i k\" 2x3 4x5 --dtype f32,bogus\n",
          "reduce \"(a 17) b -> a\" sum ?x5\n", "rearrange \"a b -> b a\" ?x4 (3,4):(1,3)\n",
          "rearrange \"a b -> b a\" x.npy\n",
          "# a comment\n\n   \nrepeat \"h w -> h w c\" ?x? -a c=3 --dtype bool\r\n"})
        seeds.push_back(to_bytes(bad));
    return seeds;
}

Bytes read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_all(const fs::path& dir, const std::vector<Bytes>& seeds) {
    fs::create_directories(dir);
    for (std::size_t i = 0; i < seeds.size(); ++i) {
        std::ofstream out(dir / fmt::format("seed-{:04}", i), std::ios::binary);
        out.write(reinterpret_cast<const char*>(seeds[i].data()),
                  static_cast<std::streamsize>(seeds[i].size()));
    }
}

int usage() {
    std::cerr << "usage: fuzz_tool seeds <corpus-dir> <out-dir> | check-seeds <corpus-dir> | replay "
                 "pattern|npy|corpus <path>...\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 3 && args[0] == "seeds") {
        const std::vector<Bytes> patterns = pattern_seeds(args[1]), npys = npy_seeds(),
                                 corpora = corpus_seeds(args[1]);
        write_all(fs::path(args[2]) / "pattern", patterns);
        write_all(fs::path(args[2]) / "npy", npys);
        write_all(fs::path(args[2]) / "corpus", corpora);
        std::cout << fmt::format("fuzz seeds: {} pattern cases, {} .npy files, {} aot corpora in {}\n",
                                 patterns.size(), npys.size(), corpora.size(), args[2]);
        return 0;
    }
    if (args.size() == 2 && args[0] == "check-seeds") {
        const std::vector<Bytes> patterns = pattern_seeds(args[1]), npys = npy_seeds(),
                                 corpora = corpus_seeds(args[1]);
        for (const Bytes& seed : patterns) fuzz::check_pattern_case(seed);
        for (const Bytes& seed : npys) fuzz::check_npy_case(seed);
        for (const Bytes& seed : corpora) fuzz::check_corpus_case(seed);
        std::cout << fmt::format("fuzz seeds: {} pattern cases, {} .npy files and {} aot corpora checked\n",
                                 patterns.size(), npys.size(), corpora.size());
        return patterns.size() > 300 && corpora.size() > 40 ? 0 : 1;  // the corpora were found and read
    }
    if (args.size() >= 3 && args[0] == "replay" &&
        (args[1] == "pattern" || args[1] == "npy" || args[1] == "corpus")) {
        const auto check = args[1] == "pattern" ? fuzz::check_pattern_case
                           : args[1] == "npy"   ? fuzz::check_npy_case
                                                : fuzz::check_corpus_case;
        std::size_t count = 0;
        for (std::size_t i = 2; i < args.size(); ++i) {
            std::vector<fs::path> files;
            if (fs::is_directory(args[i])) {
                for (const auto& entry : fs::directory_iterator(args[i]))
                    if (entry.is_regular_file() && !entry.path().filename().string().starts_with(".") &&
                        entry.path().extension() != ".md")
                        files.push_back(entry.path());
            } else if (fs::is_regular_file(args[i])) {
                files.push_back(args[i]);
            } else {
                std::cerr << "fuzz_tool: no such file or directory: " << args[i] << "\n";
                return 1;
            }
            std::sort(files.begin(), files.end());
            for (const fs::path& file : files) {
                check(read_file(file));
                ++count;
            }
        }
        std::cout << fmt::format("fuzz replay: {} {} cases passed\n", count, args[1]);
        return 0;
    }
    return usage();
}
