<?php
namespace App\Http;

/**
 * Dispatches requests to routes.
 */
final class Router
{
    /** Registers a GET route. */
    public function get(string $uri, $action): Route
    {
        return $this->addRoute(['GET', 'HEAD'], $uri, $action);
    }
}

function route_url(string $name): string { return app('url')->route($name); }
