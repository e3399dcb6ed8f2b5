// The pattern languages as PEGTL rules. Rules are empty structs with their EBNF beside them; what a
// rule builds lives in parse.cpp (actions), and what the user is told when a must<> fails lives in
// errors.cpp. Three entry rules:
//
//   einops::pattern   `b (h w) c -> b h w c`, `b i d, b j d -> b i j`   (rearrange/reduce/repeat/einsum)
//   compact::pattern  `bid,bjd->bij`, `...ij,...jk`                     (numpy/torch subscripts, opt-in)
//   pack::pattern     `b * c`                                           (pack/unpack)
//
// einops reads a pattern by splitting it at spaces and brackets; these rules accept exactly what it
// accepts (ASCII only) and fail at the first byte it would reject, so the caret can point there.
#pragma once

#include <tao/pegtl.hpp>

namespace einc::grammar {

namespace pegtl = tao::pegtl;

// ---- shared tokens ----------------------------------------------------------------------------

// arrow      ::= '->'
struct arrow : pegtl::string<'-', '>'> {};
// comma      ::= ','
struct comma : pegtl::one<','> {};
// ellipsis   ::= '...'
struct ellipsis : pegtl::string<'.', '.', '.'> {};
// spaces     ::= ' '*                      einops separates with the space character only
struct spaces : pegtl::star<pegtl::one<' '>> {};

// Raised where nothing valid can start: the message depends on the byte found (errors.cpp).
struct unexpected_character : pegtl::failure {};

namespace einops {

// word       ::= (ALPHA | DIGIT | '_')+    an axis name or a number: the action tells which
struct word : pegtl::plus<pegtl::ranges<'a', 'z', 'A', 'Z', '0', '9', '_'>> {};
// separator  ::= &(' ' | '(' | ')' | ',' | '->' | EOF)
//                                          `h2` is one name; `2h`, `b...` are errors, not two atoms
struct separator : pegtl::at<pegtl::sor<pegtl::one<' ', '(', ')', ','>, arrow, pegtl::eof>> {};
// atom       ::= (ellipsis | word) separator
struct atom : pegtl::seq<pegtl::sor<ellipsis, word>, pegtl::must<separator>> {};

// open_group ::= '('
struct open_group : pegtl::one<'('> {};
// close_group ::= ')'
struct close_group : pegtl::one<')'> {};
// group_member ::= atom                    a '(' here is a nested group, EOF or ',' an unclosed one
struct group_member : pegtl::sor<atom, pegtl::raise<group_member>> {};
// group      ::= '(' spaces (group_member spaces)* ')'
struct group : pegtl::if_must<open_group, spaces, pegtl::until<close_group, group_member, spaces>> {};

// dim        ::= group | atom
struct dim : pegtl::sor<group, atom, pegtl::raise<unexpected_character>> {};
// operand    ::= spaces (dim spaces)* &(',' | '->' | EOF)
struct operand_end : pegtl::at<pegtl::sor<comma, arrow, pegtl::eof>> {};
struct operand : pegtl::seq<spaces, pegtl::until<operand_end, dim, spaces>> {};

struct input : operand {};
struct output : operand {};
// end        ::= EOF                       after the output: no second '->', no ','
struct end : pegtl::eof {};
// pattern    ::= input (',' input)* ('->' output)? end
struct pattern
    : pegtl::seq<pegtl::list<input, comma>, pegtl::opt<pegtl::if_must<arrow, output>>, pegtl::must<end>> {};

}  // namespace einops

namespace compact {

// letter     ::= ALPHA                     every letter is one axis
struct letter : pegtl::alpha {};
// item       ::= letter | ellipsis | ' '
struct item : pegtl::sor<letter, ellipsis, pegtl::one<' '>, pegtl::raise<unexpected_character>> {};
// operand    ::= item* &(',' | '->' | EOF)
struct operand_end : pegtl::at<pegtl::sor<comma, arrow, pegtl::eof>> {};
struct operand : pegtl::until<operand_end, item> {};

struct input : operand {};
struct output : operand {};
struct end : pegtl::eof {};
// pattern    ::= input (',' input)* ('->' output)? end
struct pattern
    : pegtl::seq<pegtl::list<input, comma>, pegtl::opt<pegtl::if_must<arrow, output>>, pegtl::must<end>> {};

}  // namespace compact

namespace pack {

// blank      ::= ' ' | '\t' | '\n' | '\r'  einops splits pack patterns with str.split()
struct blanks : pegtl::star<pegtl::one<' ', '\t', '\n', '\r'>> {};
// word       ::= (ALPHA | DIGIT | '_')+
struct word : pegtl::plus<pegtl::ranges<'a', 'z', 'A', 'Z', '0', '9', '_'>> {};
// star       ::= '*'
struct star : pegtl::one<'*'> {};
// separator  ::= &(blank | EOF)
struct separator : pegtl::at<pegtl::sor<pegtl::one<' ', '\t', '\n', '\r'>, pegtl::eof>> {};
// item       ::= (star | word) separator
struct item : pegtl::seq<pegtl::sor<star, word, pegtl::raise<unexpected_character>>, pegtl::must<separator>> {
};
// pattern    ::= blanks (item blanks)* EOF
struct pattern : pegtl::seq<blanks, pegtl::until<pegtl::eof, item, blanks>> {};

}  // namespace pack

}  // namespace einc::grammar
