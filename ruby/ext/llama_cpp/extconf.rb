# frozen_string_literal: true

# Builds the LLaMACpp extension and llamac's engine in one shared object:
# mkmf compiles this directory's rb_*.c and every C file of the engine
# (src/**/*.c, headers in include/ and src/) through $srcs/$VPATH, with no
# nested make, no C++ and no prebuilt library. SIMD kernels are chosen at run
# time by the engine, so no -march flag is used and the gem runs on any x86-64.
#
# The engine's sources come from the repository (../../../src when building in
# a checkout) or from vendor/ (an installed gem: the gemspec packages them).
#
#   ruby extconf.rb && make        # in this directory or in any build directory
#   make V=1                       # show the compiler command lines

require 'mkmf'

ext_dir = __dir__
repo_root = File.expand_path('../../..', ext_dir)
vendor_root = File.join(ext_dir, 'vendor')

def engine_root?(dir)
  File.file?(File.join(dir, 'include', 'llama.h')) && File.directory?(File.join(dir, 'src'))
end

source_root =
  if engine_root?(repo_root) then repo_root
  elsif engine_root?(vendor_root) then vendor_root
  else abort "llamac: the engine's C sources are missing (looked in #{repo_root} and #{vendor_root})"
  end

# mkmf's checks log the compiler's output to mkmf.log; show it when one fails
# (mkmf raises instead of returning false when the compiler cannot link at all).
def require_check(what)
  reason = nil
  begin
    return if yield
  rescue RuntimeError => e
    reason = e.message.lines.first.strip
  end
  log = File.exist?('mkmf.log') ? File.read('mkmf.log') : ''
  $stderr.puts log.lines.last(80).join
  abort "llamac: #{what} failed#{reason ? " (#{reason})" : ''}; the compiler's output is above " \
        "(full log: #{File.expand_path('mkmf.log')})"
end

$CFLAGS << ' -std=c11 -pthread -fvisibility=hidden'
$CPPFLAGS << ' -DLLAMA_BUILD'
# the engine's own warning set (CMake uses the same)
$warnflags = '-Wall -Wextra -Wno-unused-parameter'
$INCFLAGS << " -I#{File.join(source_root, 'include')} -I#{File.join(source_root, 'src')}"
$LDFLAGS << ' -pthread'

require_check('a C11 compiler with <stdatomic.h> and _Thread_local') do
  try_compile(<<~C)
    #include <stdatomic.h>
    static _Thread_local int t;
    static atomic_bool flag;
    int main(void) { atomic_store(&flag, 1); _Static_assert(sizeof(int) >= 4, "int"); return t; }
  C
end
require_check('libm') { have_library('m', 'sqrt', 'math.h') }
require_check('pthreads') { have_library('pthread', 'pthread_create', 'pthread.h') }

engine_sources = Dir[File.join(source_root, 'src', '**', '*.c')].sort
abort "llamac: no C sources under #{File.join(source_root, 'src')}" if engine_sources.empty?
$srcs = Dir[File.join(ext_dir, '*.c')].sort + engine_sources
$VPATH.concat(engine_sources.map { |f| File.dirname(f) }.uniq)

# Dependency files, so an incremental `make` sees changed headers.
$CFLAGS << ' -MMD -MP'
$cleanfiles << '*.d'

create_makefile('llama_cpp/llama_cpp')
File.open('Makefile', 'a') { |f| f.puts "\n-include $(OBJS:.#{$OBJEXT}=.d)" }
