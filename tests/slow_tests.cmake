# Tests that take 10 s or more on two cores get the label `slow` beside
# their folder's: `ctest -LE slow` is the quick pass while editing. Included
# by ctest after the discovered tests are defined (tests/CMakeLists.txt);
# a name here that no longer exists stops ctest, so the list stays true.
set_tests_properties(
    Annotate.ThousandsOfSamplesOfEveryWorkloadReplayAndLower
    Annotate.AnInnerLoopMovedOutermostIsSplitBetweenTheThreadsAndComputesTheSame
    EvolutionarySearch.ARunIsReproducibleFromItsSeedWithAnyNumberOfBuildWorkers
    PROPERTIES LABELS "search;slow")
set_tests_properties(
    OnnxImport.TuneMeasuresExactlyTheWorkloadsCompileLooksUp
    OnnxImport.EveryOperatorCaseMatchesOnnxRuntime
    OnnxImport.ModelsMatchOnnxRuntime
    onnx_backend_node_tests
    PROPERTIES LABELS "frontend;slow")
set_tests_properties(CompiledRandomSchedules.EveryOperatorMatchesTheReference
                     PROPERTIES LABELS "correctness;slow")
set_tests_properties(SearchCli.BothPoliciesTuneTrainAModelAndApplyTheBest
                     PROPERTIES LABELS "cli;slow")
