defmodule Phoenix.Router do
  @moduledoc """
  Defines a Phoenix router.
  """

  @doc """
  Defines a scope in which routes can be nested.

  The path is prefixed to every route inside the scope, and the alias
  to every controller, so nested resources read naturally.
  """
  @spec scope(String.t(), keyword) :: Macro.t()
  defmacro scope(path, options \\ [], do: context) do
    add_scope(path, options, context)
  end

  # Expands the route's helper name from its path and options.
  defp helper_name(path, opts) when is_binary(path) do
    Keyword.get_lazy(opts, :as, fn -> Phoenix.Naming.resource_name(path) end)
  end

  @doc "Generates a route match based on an arbitrary HTTP method."
  def match(verb, path, plug, plug_opts, options \\ []) do
    add_route(:match, verb, path, plug, plug_opts, options)
  end

  defp add_route(kind, verb, path, plug, plug_opts, options) do
    scoped = Phoenix.Router.Scope.route(__MODULE__, kind, verb, path, plug, plug_opts, options)
    Module.put_attribute(__MODULE__, :phoenix_routes, scoped)
  end
end
