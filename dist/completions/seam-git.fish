# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_seam_git_global_optspecs
    string join \n h/help V/version
end

function __fish_seam_git_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_seam_git_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_seam_git_using_subcommand
    set -l cmd (__fish_seam_git_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c seam-git -n "__fish_seam_git_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c seam-git -n "__fish_seam_git_needs_command" -s V -l version -d 'Print version'
complete -c seam-git -n "__fish_seam_git_needs_command" -f -a "install-hooks" -d 'Create DIR (for core.hooksPath) with a link to this binary for every hook git runs by name; links already there are kept, anything else there is refused'
complete -c seam-git -n "__fish_seam_git_needs_command" -f -a "hook" -d 'Run as hook NAME with git\'s arguments (what a link named NAME does)'
complete -c seam-git -n "__fish_seam_git_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c seam-git -n "__fish_seam_git_using_subcommand install-hooks" -l exe -d 'The binary the links point to [default: this one]; name the installed copy when running from a build tree' -r -F
complete -c seam-git -n "__fish_seam_git_using_subcommand install-hooks" -s h -l help -d 'Print help'
complete -c seam-git -n "__fish_seam_git_using_subcommand hook" -s h -l help -d 'Print help'
complete -c seam-git -n "__fish_seam_git_using_subcommand help; and not __fish_seen_subcommand_from install-hooks hook help" -f -a "install-hooks" -d 'Create DIR (for core.hooksPath) with a link to this binary for every hook git runs by name; links already there are kept, anything else there is refused'
complete -c seam-git -n "__fish_seam_git_using_subcommand help; and not __fish_seen_subcommand_from install-hooks hook help" -f -a "hook" -d 'Run as hook NAME with git\'s arguments (what a link named NAME does)'
complete -c seam-git -n "__fish_seam_git_using_subcommand help; and not __fish_seen_subcommand_from install-hooks hook help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
