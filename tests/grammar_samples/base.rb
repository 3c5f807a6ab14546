module Sinatra
  # Base class for all Sinatra applications and middleware.
  class Base
    include Rack::Utils

    # Halt processing and return the error status provided.
    def error(code, body = nil, &block)
      response.status = code
      halt(body)
    end

    # Lookup or register a mime type in Rack's mime registry.
    def self.mime_type(type, value = nil)
      return type if type.nil? || type.to_s.include?('/')
      Rack::Mime::MIME_TYPES[type] = value
    end

    # Define a before filter; runs before all requests within the same context.
    def self.before(path = /.*/, **options, &block)
      add_filter(:before, path, **options, &block)
    end

    # Run the Sinatra app as a self-hosted server using Puma, Falcon or WEBrick.
    def self.run!(options = {}, &block)
      return if running?
      set options
      handler = Rackup::Handler.pick(server)
      start_server(handler, server_settings, handler_name, &block)
    end
    # Sets an option to the given value; a block or a hash sets several at once.
    def self.set(option, value = (not_set = true), ignore_setter = false, &block)
      raise ArgumentError if block && !not_set
      return self if value.nil?
      define_singleton("#{option}=", setter) unless ignore_setter
      define_singleton(option, getter)
    end

    # Forward the request to the downstream app -- middleware only.
    def forward
      raise 'downstream app not set' unless @app.respond_to? :call
      status, headers, body = @app.call env
      @response.status = status
      @response.body = body
    end
  end
end
