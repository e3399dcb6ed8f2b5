// A corpus command line split into words the way a POSIX shell would, for the quoting tests/corpus
// uses: '...' verbatim, "..." with \" and \\ escapes, words separated by blanks. Shared by the corpus
// runner and the fuzz seed generator.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace einc::testing {

// Nothing when a quote is never closed.
inline std::optional<std::vector<std::string>> shell_words(const std::string& line) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (c == ' ' || c == '\t') {
            if (in_word) words.push_back(std::exchange(word, {}));
            in_word = false;
            continue;
        }
        in_word = true;
        if (c == '\'') {
            const std::size_t end = line.find('\'', i + 1);
            if (end == std::string::npos) return std::nullopt;
            word += line.substr(i + 1, end - i - 1);
            i = end;
        } else if (c == '"') {
            for (++i; i < line.size() && line[i] != '"'; ++i) {
                if (line[i] == '\\' && i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\\'))
                    ++i;
                word += line[i];
            }
            if (i >= line.size()) return std::nullopt;
        } else {
            word += c;
        }
    }
    if (in_word) words.push_back(word);
    return words;
}

}  // namespace einc::testing
