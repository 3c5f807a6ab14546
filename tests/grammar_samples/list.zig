const std = @import("std");

/// Returns the sum of a slice.
pub fn sum(items: []const u32) u32 {
    var total: u32 = 0;
    for (items) |x| total += x;
    return total;
}
