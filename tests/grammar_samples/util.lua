local M = {}

--- Splits a string on a separator.
function M.split(s, sep)
  return vim.split(s, sep)
end

local function trim(s) return (s:gsub("^%s+", "")) end

return M
