# frozen_string_literal: true

require_relative 'test_helper'

# sig/llama_cpp.rbs describes the real API: well-formed, and naming exactly
# the classes, constants and methods the gem defines.
class TestSignature < Minitest::Test
  def setup
    begin
      gem 'rbs'
      require 'rbs'
    rescue LoadError
      skip 'the rbs gem is not installed'
    end
    loader = RBS::EnvironmentLoader.new
    loader.add(path: Pathname(File.expand_path('../sig', __dir__)))
    @env = RBS::Environment.from_loader(loader).resolve_type_names
    @builder = RBS::DefinitionBuilder.new(env: @env)
  end

  def declared_classes
    @env.class_decls.keys.select { |name| name.to_s.start_with?('::LLaMACpp') }
  end

  def test_every_class_and_module
    declared = declared_classes.map { |n| n.to_s.delete_prefix('::') }.sort
    actual = (['LLaMACpp'] + LLaMACpp.constants.map { |c| LLaMACpp.const_get(c) }.grep(Module).map(&:name)).sort
    assert_equal actual, declared
  end

  def test_every_constant
    declared = @env.constant_decls.keys.map(&:to_s).grep(/\A::LLaMACpp::/).map { |n| n.delete_prefix('::LLaMACpp::') }.sort
    actual = LLaMACpp.constants.reject { |c| LLaMACpp.const_get(c).is_a?(Module) }.map(&:to_s).sort
    assert_equal actual, declared
  end

  def test_every_method
    declared_classes.each do |name|
      klass = Object.const_get(name.to_s)
      instance = @builder.build_instance(name).methods.select { |_, m| m.implemented_in == name }
      singleton = @builder.build_singleton(name).methods.select { |_, m| m.implemented_in == name }
      actual_instance = klass.public_instance_methods(false)
      actual_singleton = klass.singleton_methods(false)
      if klass.instance_of?(Module) # module_function: private instance copies
        actual_instance = []
        instance = {}
      end
      assert_equal actual_instance.sort, instance.keys.reject { |m| m == :initialize }.sort, "#{name} instance methods"
      assert_equal actual_singleton.sort, singleton.keys.reject { |m| m == :new }.sort, "#{name} singleton methods"
    end
  end
end
