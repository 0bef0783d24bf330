#pragma once
// Layer options Stride<S>, Pad<P>, Dilation<D>, and the lookup of an option's value in a pack.
#include <type_traits>

namespace ctnn {

template <int S> struct Stride   { static constexpr int value = S; };
template <int P> struct Pad      { static constexpr int value = P; };
template <int D> struct Dilation { static constexpr int value = D; };

namespace detail {
template <template <int> class Opt, class T> inline constexpr bool is_option_v = false;
template <template <int> class Opt, int V> inline constexpr bool is_option_v<Opt, Opt<V>> = true;

template <template <int> class Opt, class... Opts>
inline constexpr int option_count = (0 + ... + (is_option_v<Opt, Opts> ? 1 : 0));

// Matched by pattern rather than by reading First::value, so that an unknown option (a type without
// ::value) costs no error here: the layer's "unknown option" rule reports it, alone.
template <template <int> class Opt, int Default, class... Opts>
struct option_value { static constexpr int value = Default; };
template <template <int> class Opt, int Default, class First, class... Rest>
struct option_value<Opt, Default, First, Rest...> : option_value<Opt, Default, Rest...> {};
template <template <int> class Opt, int Default, int V, class... Rest>
struct option_value<Opt, Default, Opt<V>, Rest...> { static constexpr int value = V; };
}  // namespace detail

// Value of option Opt among Opts..., or Default when absent.
template <template <int> class Opt, int Default, class... Opts>
inline constexpr int option_v = detail::option_value<Opt, Default, Opts...>::value;

// How many of Opts... are of the kinds in Allowed... (the rest are unknown).
template <class T> inline constexpr bool is_conv_option_v =
    detail::is_option_v<Stride, T> || detail::is_option_v<Pad, T> || detail::is_option_v<Dilation, T>;
template <class T> inline constexpr bool is_pool_option_v =
    detail::is_option_v<Stride, T> || detail::is_option_v<Pad, T>;

template <class... Opts>
inline constexpr bool options_unique_v = detail::option_count<Stride, Opts...> <= 1 &&
                                         detail::option_count<Pad, Opts...> <= 1 &&
                                         detail::option_count<Dilation, Opts...> <= 1;

}  // namespace ctnn
