// A vector that keeps up to N elements inline and goes to the heap only beyond: shapes and strides
// (ranks above 8 are rare), so that copying a TensorView - which the hot path does - allocates nothing.
// For trivially copyable elements only; the subset of std::vector's interface einc uses.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <type_traits>

namespace einc {

template <typename T, std::size_t N>
class SmallVector {
    static_assert(std::is_trivially_copyable_v<T>, "SmallVector copies its elements as bytes");

public:
    using value_type = T;
    using size_type = std::size_t;
    using difference_type = std::ptrdiff_t;
    using reference = T&;
    using const_reference = const T&;
    using pointer = T*;
    using const_pointer = const T*;
    using iterator = T*;
    using const_iterator = const T*;
    using reverse_iterator = std::reverse_iterator<iterator>;
    using const_reverse_iterator = std::reverse_iterator<const_iterator>;

    SmallVector() = default;
    explicit SmallVector(size_type count, const T& value = T{}) { assign(count, value); }
    SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
    template <std::input_iterator It>
    SmallVector(It first, It last) {
        assign(first, last);
    }
    SmallVector(const SmallVector& other) { copy_from(other); }
    SmallVector(SmallVector&& other) noexcept { take(other); }
    SmallVector& operator=(const SmallVector& other) {
        if (this != &other) copy_from(other);
        return *this;
    }
    SmallVector& operator=(SmallVector&& other) noexcept {
        if (this != &other) {
            release();
            take(other);
        }
        return *this;
    }
    SmallVector& operator=(std::initializer_list<T> values) {
        assign(values.begin(), values.end());
        return *this;
    }
    ~SmallVector() { release(); }

    size_type size() const { return size_; }
    bool empty() const { return size_ == 0; }
    size_type capacity() const { return capacity_; }
    T* data() { return data_; }
    const T* data() const { return data_; }
    iterator begin() { return data_; }
    iterator end() { return data_ + size_; }
    const_iterator begin() const { return data_; }
    const_iterator end() const { return data_ + size_; }
    const_iterator cbegin() const { return data_; }
    const_iterator cend() const { return data_ + size_; }
    reverse_iterator rbegin() { return reverse_iterator(end()); }
    reverse_iterator rend() { return reverse_iterator(begin()); }
    const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
    const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
    T& operator[](size_type i) { return data_[i]; }
    const T& operator[](size_type i) const { return data_[i]; }
    T& front() { return data_[0]; }
    const T& front() const { return data_[0]; }
    T& back() { return data_[size_ - 1]; }
    const T& back() const { return data_[size_ - 1]; }

    void reserve(size_type wanted) {
        if (wanted <= capacity_) return;
        const size_type grown = std::max(wanted, 2 * capacity_);
        T* heap = std::allocator<T>().allocate(grown);
        if (size_ > 0) std::memcpy(static_cast<void*>(heap), data_, size_ * sizeof(T));
        release();
        data_ = heap;
        capacity_ = grown;
    }
    void clear() { size_ = 0; }
    void resize(size_type count, const T& value = T{}) {
        reserve(count);
        if (count > size_) std::fill(data_ + size_, data_ + count, value);
        size_ = count;
    }
    void assign(size_type count, const T& value) {
        clear();
        resize(count, value);
    }
    template <std::input_iterator It>
    void assign(It first, It last) {
        clear();
        insert(end(), first, last);
    }
    void push_back(const T& value) {
        const T copy = value;  // `value` may be an element of this vector, which reserve may move
        reserve(size_ + 1);
        data_[size_++] = copy;
    }
    template <typename... Args>
    T& emplace_back(Args&&... args) {
        push_back(T(std::forward<Args>(args)...));
        return back();
    }
    void pop_back() { --size_; }

    iterator insert(const_iterator position, const T& value) { return insert(position, size_type{1}, value); }
    iterator insert(const_iterator position, size_type count, const T& value) {
        const T copy = value;
        const size_type at = open_gap(position, count);
        std::fill(data_ + at, data_ + at + count, copy);
        return data_ + at;
    }
    template <std::input_iterator It>
    iterator insert(const_iterator position, It first, It last) {
        const size_type at = static_cast<size_type>(position - data_);
        if constexpr (std::forward_iterator<It>) {
            const SmallVector copy(first, last, Owned{});  // the range may be inside this vector
            open_gap(position, copy.size());
            std::copy(copy.begin(), copy.end(), data_ + at);
        } else {
            for (size_type i = at; first != last; ++first, ++i) insert(data_ + i, *first);
        }
        return data_ + at;
    }
    iterator insert(const_iterator position, std::initializer_list<T> values) {
        return insert(position, values.begin(), values.end());
    }
    iterator erase(const_iterator position) { return erase(position, position + 1); }
    iterator erase(const_iterator first, const_iterator last) {
        const auto at = static_cast<size_type>(first - data_), count = static_cast<size_type>(last - first);
        std::copy(data_ + at + count, data_ + size_, data_ + at);
        size_ -= count;
        return data_ + at;
    }

    friend bool operator==(const SmallVector& a, const SmallVector& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end());
    }
    friend auto operator<=>(const SmallVector& a, const SmallVector& b) {
        return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
    }

private:
    struct Owned {};
    template <std::forward_iterator It>
    SmallVector(It first, It last, Owned) {
        reserve(static_cast<size_type>(std::distance(first, last)));
        for (; first != last; ++first) data_[size_++] = *first;
    }
    // Moves [position, end) `count` places right; returns the gap's index.
    size_type open_gap(const_iterator position, size_type count) {
        const auto at = static_cast<size_type>(position - data_);
        reserve(size_ + count);
        std::copy_backward(data_ + at, data_ + size_, data_ + size_ + count);
        size_ += count;
        return at;
    }
    void copy_from(const SmallVector& other) {
        size_ = 0;
        reserve(other.size_);
        if (other.size_ > 0) std::memcpy(static_cast<void*>(data_), other.data_, other.size_ * sizeof(T));
        size_ = other.size_;
    }
    bool on_heap() const { return data_ != inline_; }
    void release() {
        if (on_heap()) std::allocator<T>().deallocate(data_, capacity_);
        data_ = inline_;
        capacity_ = N;
    }
    void take(SmallVector& other) {
        if (other.on_heap()) {
            data_ = other.data_;
            capacity_ = other.capacity_;
        } else {
            data_ = inline_;
            capacity_ = N;
            std::memcpy(static_cast<void*>(inline_), other.inline_, other.size_ * sizeof(T));
        }
        size_ = other.size_;
        other.data_ = other.inline_;
        other.capacity_ = N;
        other.size_ = 0;
    }

    T* data_ = inline_;
    size_type size_ = 0;
    size_type capacity_ = N;
    T inline_[N];
};

}  // namespace einc
