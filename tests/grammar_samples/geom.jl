"""
    area(r)

Area of a circle of radius `r`.
"""
function area(r)
    return pi * r^2
end

struct Circle
    r::Float64
end
